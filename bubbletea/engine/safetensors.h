// The safetensors container format: parser (untrusted input) and writer.
//
// Layout: an 8-byte little-endian header length N, N bytes of UTF-8 JSON
//   {"<tensor>": {"dtype": "BF16", "shape": [r, c], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"<key>": "<string>", ...}}
// (optionally padded with spaces), then the data section. Offsets are relative to the start
// of the data section (byte 8 + N). Tensors are row-major, little-endian.
//
// The parser treats every byte as hostile: it never reads outside `file`, never throws,
// and rejects with a message naming the source and the tensor anything that is truncated,
// malformed, of an unknown dtype, whose byte size disagrees with dtype x shape, out of
// bounds, overlapping another tensor, or leaving holes in the data section (as the reference
// implementation does). It knows every dtype the format defines so that sizes can be
// checked; which dtypes a model may use is the loader's decision.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "atlas/common/status.h"
#include "bubbletea/engine/dtype.h"

namespace atlas::bubbletea {

// Limits applied while parsing (the reference implementation caps the header at 100 MB).
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;
constexpr int kMaxSafetensorsJsonDepth = 8;
constexpr size_t kMaxSafetensorsRank = 8;

struct SafetensorsTensor {
    std::string name;
    std::string dtype;                  // as written: "F32", "BF16", "I64", ...
    std::optional<DType> engine_dtype;  // set when the dtype is one the engine computes with
    std::vector<int64_t> shape;
    uint64_t begin = 0;  // byte offsets within the data section, begin <= end
    uint64_t end = 0;

    uint64_t numElements() const;
};

struct SafetensorsHeader {
    uint64_t header_bytes = 0;               // N
    uint64_t data_offset = 0;                // 8 + N: where the data section starts in the file
    uint64_t data_bytes = 0;                 // file size - data_offset
    std::vector<SafetensorsTensor> tensors;  // sorted by begin offset
    std::map<std::string, std::string> metadata;

    // nullptr when absent.
    const SafetensorsTensor* find(std::string_view name) const;
};

// Parses and validates the header of a complete safetensors file image. `source` (usually
// the path) prefixes every error message. Never throws.
Result<SafetensorsHeader> parseSafetensors(std::span<const std::byte> file,
                                           std::string_view source);

// Bytes per element of a safetensors dtype string, or 0 when unknown.
size_t safetensorsDtypeSize(std::string_view dtype);

// One tensor to write. `fill(first_element, out)` must fill `out` (a whole number of
// elements, in the tensor's dtype) with elements [first_element, first_element + count);
// the writer calls it for consecutive slices so that a tensor never has to be materialized
// whole.
struct TensorToWrite {
    std::string name;
    DType dtype = DType::kF32;
    std::vector<int64_t> shape;
    std::function<void(uint64_t first_element, std::span<std::byte> out)> fill;
};

// Writes a safetensors file: the header (keys sorted, padded with spaces to a multiple of 8
// bytes so that the data section is 8-byte aligned), then the tensors in the given order.
// Writes to "<path>.tmp" and renames, so readers never see a partial file. Blocking I/O.
Status writeSafetensors(const std::filesystem::path& path,
                        const std::vector<TensorToWrite>& tensors,
                        const std::map<std::string, std::string>& metadata);

}  // namespace atlas::bubbletea
