// Element types of model weights and KV caches, and the scalar conversions between them.
//
// The engine computes in fp32. bf16 and f16 values are widened exactly; narrowing to bf16
// rounds to nearest-even (NaN stays NaN). All helpers are pure and thread-safe. Loads go
// through memcpy because tensor data inside a safetensors file is not guaranteed to be
// aligned to its element size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace atlas::bubbletea {

enum class DType : uint8_t {
    kF32,
    kBF16,
    kF16,
};

// Bytes per element.
constexpr size_t dtypeSize(DType dtype) {
    return dtype == DType::kF32 ? 4 : 2;
}

// The safetensors spelling: "F32", "BF16", "F16".
constexpr std::string_view dtypeName(DType dtype) {
    switch (dtype) {
        case DType::kF32:
            return "F32";
        case DType::kBF16:
            return "BF16";
        case DType::kF16:
            return "F16";
    }
    return "?";
}

// The Hugging Face config.json `torch_dtype` spelling: "float32", "bfloat16", "float16".
constexpr std::string_view torchDtypeName(DType dtype) {
    switch (dtype) {
        case DType::kF32:
            return "float32";
        case DType::kBF16:
            return "bfloat16";
        case DType::kF16:
            return "float16";
    }
    return "?";
}

// Accepts either spelling above (case-sensitive, as the formats define them).
inline std::optional<DType> parseDtype(std::string_view name) {
    if (name == "F32" || name == "float32") {
        return DType::kF32;
    }
    if (name == "BF16" || name == "bfloat16") {
        return DType::kBF16;
    }
    if (name == "F16" || name == "float16") {
        return DType::kF16;
    }
    return std::nullopt;
}

inline float bf16BitsToFloat(uint16_t bits) {
    const uint32_t wide = static_cast<uint32_t>(bits) << 16;
    float out;
    std::memcpy(&out, &wide, sizeof(out));
    return out;
}

// Round-to-nearest-even, like torch's float -> bfloat16 cast.
inline uint16_t floatToBf16Bits(float value) {
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof(bits));
    if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
        return static_cast<uint16_t>((bits >> 16) | 0x40u);  // quiet NaN
    }
    const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
    return static_cast<uint16_t>((bits + rounding) >> 16);
}

// IEEE 754 binary16 -> binary32, exact (handles subnormals, inf, NaN).
inline float f16BitsToFloat(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {
            int e = -1;
            do {
                ++e;
                mant <<= 1;
            } while ((mant & 0x400u) == 0);
            bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
        }
    } else if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float out;
    std::memcpy(&out, &bits, sizeof(out));
    return out;
}

// Round-to-nearest-even binary32 -> binary16 (overflow -> inf, NaN stays NaN).
uint16_t floatToF16Bits(float value);

// Reads element `index` of a tensor of `dtype` at `base` (any alignment) as fp32.
inline float loadAsFloat(const std::byte* base, DType dtype, size_t index) {
    if (dtype == DType::kF32) {
        float v;
        std::memcpy(&v, base + index * 4, 4);
        return v;
    }
    uint16_t bits;
    std::memcpy(&bits, base + index * 2, 2);
    return dtype == DType::kBF16 ? bf16BitsToFloat(bits) : f16BitsToFloat(bits);
}

// Converts `count` elements starting at element `first` to fp32 (any source alignment).
void convertToFloat(const std::byte* base, DType dtype, size_t first, size_t count, float* out);

// Writes `count` fp32 values as `dtype`, rounding to nearest-even when narrowing.
void convertFromFloat(const float* in, size_t count, DType dtype, std::byte* out);

}  // namespace atlas::bubbletea
