#include "bubbletea/engine/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <nlohmann/json.hpp>
#include <set>

namespace atlas::bubbletea {

namespace {

using Json = nlohmann::json;

Status formatError(std::string_view source, const std::string& what) {
    return {Code::kInvalidArgument, std::string(source) + ": " + what};
}

Status tensorError(std::string_view source, std::string_view tensor, const std::string& what) {
    return {Code::kInvalidArgument,
            std::string(source) + ": tensor \"" + std::string(tensor) + "\": " + what};
}

// nlohmann's parser is iterative, but a deep nesting still costs memory and time that a
// header never needs: the deepest legal header is {"t": {"shape": [..]}} (depth 3).
bool nestingWithin(std::string_view text, int max_depth) {
    int depth = 0;
    bool in_string = false;
    bool escaped = false;
    for (char ch : text) {
        if (in_string) {
            if (escaped) {
                escaped = false;
            } else if (ch == '\\') {
                escaped = true;
            } else if (ch == '"') {
                in_string = false;
            }
            continue;
        }
        if (ch == '"') {
            in_string = true;
        } else if (ch == '{' || ch == '[') {
            if (++depth > max_depth) {
                return false;
            }
        } else if (ch == '}' || ch == ']') {
            --depth;
        }
    }
    return true;
}

// Multiplies without overflow; false when the product would exceed `limit`.
bool mulWithin(uint64_t a, uint64_t b, uint64_t limit, uint64_t* out) {
    if (a != 0 && b > limit / a) {
        return false;
    }
    *out = a * b;
    return *out <= limit;
}

bool readUnsigned(const Json& v, uint64_t* out) {
    if (v.is_number_unsigned()) {
        *out = v.get<uint64_t>();
        return true;
    }
    if (v.is_number_integer() && v.get<int64_t>() >= 0) {
        *out = static_cast<uint64_t>(v.get<int64_t>());
        return true;
    }
    return false;
}

Result<SafetensorsTensor> parseTensorEntry(const std::string& name, const Json& entry,
                                           uint64_t data_bytes, std::string_view source) {
    if (!entry.is_object()) {
        return tensorError(source, name, "entry is not a JSON object");
    }
    SafetensorsTensor t;
    t.name = name;
    auto dtype_it = entry.find("dtype");
    if (dtype_it == entry.end() || !dtype_it->is_string()) {
        return tensorError(source, name, "missing or non-string \"dtype\"");
    }
    t.dtype = dtype_it->get<std::string>();
    const size_t elem_size = safetensorsDtypeSize(t.dtype);
    if (elem_size == 0) {
        return tensorError(source, name, "unknown dtype \"" + t.dtype + "\"");
    }
    t.engine_dtype = parseDtype(t.dtype);
    if (t.dtype == "float32" || t.dtype == "bfloat16" || t.dtype == "float16") {
        t.engine_dtype.reset();  // parseDtype also accepts torch spellings; the format does not
    }

    auto shape_it = entry.find("shape");
    if (shape_it == entry.end() || !shape_it->is_array()) {
        return tensorError(source, name, "missing or non-array \"shape\"");
    }
    if (shape_it->size() > kMaxSafetensorsRank) {
        return tensorError(source, name,
                           "rank " + std::to_string(shape_it->size()) + " exceeds " +
                               std::to_string(kMaxSafetensorsRank));
    }
    // Every element count must fit the data section, so bound the product by it (plus one
    // so that a zero-size data section still admits empty tensors).
    uint64_t elements = 1;
    for (const Json& dim : *shape_it) {
        uint64_t d = 0;
        if (!readUnsigned(dim, &d)) {
            return tensorError(source, name, "shape entries must be non-negative integers");
        }
        if (!mulWithin(elements, d, (1ull << 62), &elements)) {
            return tensorError(source, name, "shape element count overflows");
        }
        t.shape.push_back(static_cast<int64_t>(d));
    }

    auto off_it = entry.find("data_offsets");
    if (off_it == entry.end() || !off_it->is_array() || off_it->size() != 2) {
        return tensorError(source, name, "\"data_offsets\" must be an array [begin, end]");
    }
    if (!readUnsigned((*off_it)[0], &t.begin) || !readUnsigned((*off_it)[1], &t.end)) {
        return tensorError(source, name, "data_offsets must be non-negative integers");
    }
    if (t.begin > t.end) {
        return tensorError(source, name,
                           "data_offsets [" + std::to_string(t.begin) + ", " +
                               std::to_string(t.end) + "] has begin after end");
    }
    if (t.end > data_bytes) {
        return tensorError(source, name,
                           "data_offsets [" + std::to_string(t.begin) + ", " +
                               std::to_string(t.end) + "] are out of bounds: the data section " +
                               "holds " + std::to_string(data_bytes) + " bytes (file truncated?)");
    }
    uint64_t bytes = 0;
    if (!mulWithin(elements, elem_size, UINT64_MAX, &bytes) || bytes != t.end - t.begin) {
        return tensorError(source, name,
                           "byte size " + std::to_string(t.end - t.begin) +
                               " does not match dtype " + t.dtype + " x shape (" +
                               std::to_string(elements) + " elements)");
    }
    return t;
}

}  // namespace

uint64_t SafetensorsTensor::numElements() const {
    uint64_t n = 1;
    for (int64_t d : shape) {
        n *= static_cast<uint64_t>(d);
    }
    return n;
}

const SafetensorsTensor* SafetensorsHeader::find(std::string_view name) const {
    for (const SafetensorsTensor& t : tensors) {
        if (t.name == name) {
            return &t;
        }
    }
    return nullptr;
}

size_t safetensorsDtypeSize(std::string_view dtype) {
    static constexpr std::array<std::pair<std::string_view, size_t>, 15> kSizes = {{
        {"BOOL", 1},
        {"U8", 1},
        {"I8", 1},
        {"F8_E4M3", 1},
        {"F8_E5M2", 1},
        {"I16", 2},
        {"U16", 2},
        {"F16", 2},
        {"BF16", 2},
        {"I32", 4},
        {"U32", 4},
        {"F32", 4},
        {"I64", 8},
        {"U64", 8},
        {"F64", 8},
    }};
    for (const auto& [name, size] : kSizes) {
        if (name == dtype) {
            return size;
        }
    }
    return 0;
}

Result<SafetensorsHeader> parseSafetensors(std::span<const std::byte> file,
                                           std::string_view source) {
    if (file.size() < 8) {
        return formatError(source, "truncated: " + std::to_string(file.size()) +
                                       " bytes, too short for the 8-byte header length");
    }
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) {
        n = (n << 8) | static_cast<uint8_t>(file[static_cast<size_t>(i)]);
    }
    if (n == 0) {
        return formatError(source, "header length is 0");
    }
    if (n > kMaxSafetensorsHeaderBytes) {
        return formatError(source, "header length " + std::to_string(n) + " exceeds the " +
                                       std::to_string(kMaxSafetensorsHeaderBytes) +
                                       "-byte limit (corrupt file?)");
    }
    if (n > file.size() - 8) {
        return formatError(source, "truncated: header length " + std::to_string(n) + " but only " +
                                       std::to_string(file.size() - 8) + " bytes follow");
    }
    SafetensorsHeader header;
    header.header_bytes = n;
    header.data_offset = 8 + n;
    header.data_bytes = file.size() - header.data_offset;
    const std::string_view text(reinterpret_cast<const char*>(file.data()) + 8,
                                static_cast<size_t>(n));
    if (text.front() != '{') {
        return formatError(source, "header does not start with '{'");
    }
    if (!nestingWithin(text, kMaxSafetensorsJsonDepth)) {
        return formatError(
            source, "header JSON nests deeper than " + std::to_string(kMaxSafetensorsJsonDepth));
    }

    try {
        // A callback keeps one set of keys per open object: JSON allows duplicate keys and
        // nlohmann keeps the last, which would hide a conflicting second definition.
        std::vector<std::set<std::string>> open_objects;
        std::string duplicate;
        Json::parser_callback_t on_event = [&](int, Json::parse_event_t event, Json& parsed) {
            if (event == Json::parse_event_t::object_start) {
                open_objects.emplace_back();
            } else if (event == Json::parse_event_t::object_end) {
                if (!open_objects.empty()) {
                    open_objects.pop_back();
                }
            } else if (event == Json::parse_event_t::key && !open_objects.empty() &&
                       parsed.is_string()) {
                if (!open_objects.back().insert(parsed.get<std::string>()).second &&
                    duplicate.empty()) {
                    duplicate = parsed.get<std::string>();
                }
            }
            return true;
        };
        Json root = Json::parse(text.begin(), text.end(), on_event, /*allow_exceptions=*/false);
        if (root.is_discarded() || !root.is_object()) {
            return formatError(source, "header is not a valid JSON object");
        }
        if (!duplicate.empty()) {
            return formatError(source, "header repeats the key \"" + duplicate + "\"");
        }
        for (const auto& [name, entry] : root.items()) {
            if (name == "__metadata__") {
                if (!entry.is_object()) {
                    return formatError(source, "__metadata__ is not an object");
                }
                for (const auto& [key, value] : entry.items()) {
                    if (!value.is_string()) {
                        return formatError(
                            source, "__metadata__ value for \"" + key + "\" is not a string");
                    }
                    header.metadata.emplace(key, value.get<std::string>());
                }
                continue;
            }
            auto tensor = parseTensorEntry(name, entry, header.data_bytes, source);
            if (!tensor.isOk()) {
                return tensor.status();
            }
            header.tensors.push_back(std::move(tensor.value()));
        }
    } catch (const std::exception& e) {
        // Only allocation failure should get here; keep the no-throw contract anyway.
        return formatError(source, std::string("header could not be parsed: ") + e.what());
    }

    std::sort(header.tensors.begin(), header.tensors.end(),
              [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
                  return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
              });
    uint64_t covered = 0;
    const SafetensorsTensor* previous = nullptr;
    for (const SafetensorsTensor& t : header.tensors) {
        if (t.begin < covered) {
            return tensorError(source, t.name,
                               "data_offsets [" + std::to_string(t.begin) + ", " +
                                   std::to_string(t.end) + "] overlap tensor \"" +
                                   (previous != nullptr ? previous->name : std::string()) + "\"");
        }
        if (t.begin > covered) {
            return tensorError(source, t.name,
                               "data section has a hole of " + std::to_string(t.begin - covered) +
                                   " bytes before this tensor");
        }
        covered = t.end;
        previous = &t;
    }
    if (covered != header.data_bytes) {
        return formatError(source, std::to_string(header.data_bytes - covered) +
                                       " bytes after the last tensor are not described by the "
                                       "header");
    }
    return header;
}

namespace {

class FileWriter {
  public:
    explicit FileWriter(int fd) : fd_(fd) {}
    ~FileWriter() {
        if (fd_ >= 0) {
            ::close(fd_);
        }
    }
    FileWriter(const FileWriter&) = delete;
    FileWriter& operator=(const FileWriter&) = delete;

    Status write(const void* data, size_t len, const std::string& what) {
        const auto* p = static_cast<const char*>(data);
        while (len > 0) {
            const ssize_t n = ::write(fd_, p, len);
            if (n < 0) {
                if (errno == EINTR) {
                    continue;
                }
                return Status::fromErrno("write " + what, errno);
            }
            p += n;
            len -= static_cast<size_t>(n);
        }
        return Status::ok();
    }

    Status close(const std::string& what) {
        const int fd = fd_;
        fd_ = -1;
        if (::close(fd) != 0) {
            return Status::fromErrno("close " + what, errno);
        }
        return Status::ok();
    }

  private:
    int fd_;
};

}  // namespace

Status writeSafetensors(const std::filesystem::path& path,
                        const std::vector<TensorToWrite>& tensors,
                        const std::map<std::string, std::string>& metadata) {
    Json header = Json::object();
    if (!metadata.empty()) {
        header["__metadata__"] = metadata;
    }
    uint64_t offset = 0;
    std::vector<uint64_t> elements(tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
        const TensorToWrite& t = tensors[i];
        uint64_t n = 1;
        for (int64_t d : t.shape) {
            if (d < 0) {
                return {Code::kInvalidArgument, "tensor " + t.name + " has a negative dim"};
            }
            n *= static_cast<uint64_t>(d);
        }
        elements[i] = n;
        const uint64_t bytes = n * dtypeSize(t.dtype);
        header[t.name] = {{"dtype", std::string(dtypeName(t.dtype))},
                          {"shape", t.shape},
                          {"data_offsets", {offset, offset + bytes}}};
        offset += bytes;
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    std::array<unsigned char, 8> len_le{};
    for (int i = 0; i < 8; ++i) {
        len_le[i] = static_cast<unsigned char>((text.size() >> (8 * i)) & 0xff);
    }

    const std::filesystem::path tmp = path.string() + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        return Status::fromErrno("open " + tmp.string(), errno);
    }
    FileWriter out(fd);
    const std::string what = tmp.string();
    ATLAS_RETURN_IF_ERROR(out.write(len_le.data(), len_le.size(), what));
    ATLAS_RETURN_IF_ERROR(out.write(text.data(), text.size(), what));
    // Fill in slices of at most 64 MiB so that no tensor has to exist whole in memory.
    constexpr uint64_t kSliceBytes = 64ull << 20;
    std::vector<std::byte> buffer;
    for (size_t i = 0; i < tensors.size(); ++i) {
        const TensorToWrite& t = tensors[i];
        const uint64_t esize = dtypeSize(t.dtype);
        const uint64_t slice_elems = kSliceBytes / esize;
        for (uint64_t first = 0; first < elements[i]; first += slice_elems) {
            const uint64_t count = std::min(slice_elems, elements[i] - first);
            buffer.resize(count * esize);
            t.fill(first, std::span<std::byte>(buffer.data(), buffer.size()));
            ATLAS_RETURN_IF_ERROR(out.write(buffer.data(), buffer.size(), what));
        }
    }
    ATLAS_RETURN_IF_ERROR(out.close(what));
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
        return {Code::kSystem,
                "rename " + tmp.string() + " -> " + path.string() + ": " + ec.message()};
    }
    return Status::ok();
}

}  // namespace atlas::bubbletea
