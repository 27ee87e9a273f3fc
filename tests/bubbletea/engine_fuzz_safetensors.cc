// libFuzzer target for the model-file parsers that read untrusted bytes: the safetensors
// header (parseSafetensors) and config.json (parseConfigJson). The parser sources are
// compiled into this target so that libFuzzer instruments them. Besides "no crash, no
// sanitizer report", it checks the invariants the loader relies on for accepted files.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>

#include "bubbletea/engine/model_config.h"
#include "bubbletea/engine/safetensors.h"

namespace {

void require(bool condition) {
    if (!condition) {
        std::abort();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace atlas::bubbletea;
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
    auto parsed = parseSafetensors(bytes, "fuzz");
    if (parsed.isOk()) {
        const SafetensorsHeader& h = parsed.value();
        require(h.data_offset == 8 + h.header_bytes && h.data_offset <= size);
        require(h.data_bytes == size - h.data_offset);
        uint64_t covered = 0;
        for (const SafetensorsTensor& t : h.tensors) {
            require(t.begin == covered && t.begin <= t.end && t.end <= h.data_bytes);
            require(t.numElements() * safetensorsDtypeSize(t.dtype) == t.end - t.begin);
            covered = t.end;
        }
        require(covered == h.data_bytes);
    } else {
        require(!parsed.status().message().empty());
    }
    auto config =
        parseConfigJson(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json");
    if (config.isOk()) {
        require(validateConfig(config.value()).isOk());
        require(ropeInverseFrequencies(config.value()).size() ==
                static_cast<size_t>(config->head_dim / 2));
    }
    return 0;
}
