#include "bubbletea/engine/dtype.h"

#include <cmath>

namespace atlas::bubbletea {

uint16_t floatToF16Bits(float value) {
    uint32_t x;
    std::memcpy(&x, &value, sizeof(x));
    const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
    const uint32_t abs_bits = x & 0x7fffffffu;
    if (abs_bits >= 0x7f800000u) {  // inf or NaN
        return static_cast<uint16_t>(sign | 0x7c00u | (abs_bits > 0x7f800000u ? 0x200u : 0u));
    }
    if (abs_bits >= 0x477ff000u) {  // >= 65520 rounds (half-even) past 65504 to inf
        return static_cast<uint16_t>(sign | 0x7c00u);
    }
    if (abs_bits < 0x38800000u) {  // below 2^-14: f16 subnormal or zero
        float magnitude;
        std::memcpy(&magnitude, &abs_bits, sizeof(magnitude));
        // Scaling by 2^24 is exact; nearbyint rounds half-even in the default mode. A result
        // of 0x400 is the smallest normal, which is also its correct encoding.
        const auto units = static_cast<uint32_t>(std::nearbyint(magnitude * 16777216.0f));
        return static_cast<uint16_t>(sign | units);
    }
    const uint32_t mant = abs_bits & 0x7fffffu;
    const uint32_t exp = (abs_bits >> 23) - 127 + 15;
    uint32_t h = (exp << 10) | (mant >> 13);
    const uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u) != 0)) {
        ++h;  // a carry into the exponent is the correct rounding
    }
    return static_cast<uint16_t>(sign | h);
}

void convertToFloat(const std::byte* base, DType dtype, size_t first, size_t count, float* out) {
    switch (dtype) {
        case DType::kF32:
            std::memcpy(out, base + first * 4, count * 4);
            return;
        case DType::kBF16:
            for (size_t i = 0; i < count; ++i) {
                uint16_t bits;
                std::memcpy(&bits, base + (first + i) * 2, 2);
                out[i] = bf16BitsToFloat(bits);
            }
            return;
        case DType::kF16:
            for (size_t i = 0; i < count; ++i) {
                uint16_t bits;
                std::memcpy(&bits, base + (first + i) * 2, 2);
                out[i] = f16BitsToFloat(bits);
            }
            return;
    }
}

void convertFromFloat(const float* in, size_t count, DType dtype, std::byte* out) {
    switch (dtype) {
        case DType::kF32:
            std::memcpy(out, in, count * 4);
            return;
        case DType::kBF16:
            for (size_t i = 0; i < count; ++i) {
                const uint16_t bits = floatToBf16Bits(in[i]);
                std::memcpy(out + i * 2, &bits, 2);
            }
            return;
        case DType::kF16:
            for (size_t i = 0; i < count; ++i) {
                const uint16_t bits = floatToF16Bits(in[i]);
                std::memcpy(out + i * 2, &bits, 2);
            }
            return;
    }
}

}  // namespace atlas::bubbletea
