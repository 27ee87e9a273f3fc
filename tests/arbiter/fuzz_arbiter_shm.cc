// libFuzzer target: validation of a node-local arbitration segment image (plugin/wan/
// shm_layout.h), the bytes another process on the host wrote. The input is a prefix of the
// image (the rest is zero); the header check runs on the real input size and on the full
// image, the table check whenever the header passes.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "plugin/wan/shm_layout.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using atlas::plugin::wan::ShmSegment;
    (void)atlas::plugin::wan::validateSegmentHeader(data, size);
    std::vector<uint8_t> image(sizeof(ShmSegment), 0);
    if (size > 0) {  // an empty input may come with data == nullptr
        std::memcpy(image.data(), data, std::min(size, image.size()));
    }
    if (atlas::plugin::wan::validateSegmentHeader(image.data(), image.size()).isOk()) {
        ShmSegment seg;
        std::memcpy(static_cast<void*>(&seg), image.data(), sizeof(seg));
        (void)atlas::plugin::wan::validateSegmentTable(seg);
    }
    return 0;
}
