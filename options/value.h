// Strict text-to-value parsers shared by every configuration entry point (ATLAS_* variables,
// command-line flags, config-file values): no surrounding whitespace, no trailing garbage, no
// sign on unsigned numbers, no overflow, no hex, nan or inf. Each returns nullopt on any
// deviation; the callers (options/kinds.h) turn that into a message naming the option.
//
// Pure functions, no allocation except where a string is returned; safe in the NCCL plugin.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace atlas::options {

inline constexpr uint64_t kKiB = 1024;
inline constexpr uint64_t kMiB = 1024 * kKiB;
inline constexpr uint64_t kGiB = 1024 * kMiB;

// true/false/1/0/yes/no, case-insensitive.
std::optional<bool> parseBool(std::string_view text);
// Decimal digits only: "-1", "+1", " 8", "0x10" and values above 2^64-1 are rejected.
std::optional<uint64_t> parseUnsigned(std::string_view text);
// An optional '-' and decimal digits, within int64_t.
std::optional<int64_t> parseSigned(std::string_view text);
// Bytes: decimal digits with an optional binary suffix K, M or G (1K = 1024), which may be
// followed by "B" or "iB" (64KiB, 64KB, 64K); a bare trailing "B" is allowed (512B).
// Case-insensitive; the product must fit in 64 bits.
std::optional<uint64_t> parseSize(std::string_view text);
// A plain finite decimal number: [+-]digits[.digits][e[+-]digits]. No hex, inf or nan.
std::optional<double> parseDouble(std::string_view text);

// Bytes with the largest exact binary suffix: 524288 -> "512K", 1000 -> "1000".
std::string formatSize(uint64_t bytes);
// The shortest text that parses back to `v` ("0.75", "250", "1e-06"); integers below 1e15 in
// plain digits.
std::string formatDouble(double v);

bool equalsIgnoreCase(std::string_view a, std::string_view b);
// Splits at every `sep`; "" gives one empty piece, "a," gives {"a", ""}.
std::vector<std::string_view> split(std::string_view text, char sep);
// Text for a message: quoted, cut to 80 bytes, control bytes shown as '?'.
std::string quote(std::string_view text);

// Edit distance (insertions, deletions, substitutions, swaps of neighbours), for "did you
// mean".
size_t editDistance(std::string_view a, std::string_view b);
// The candidate closest to `name` when it is close enough to be a likely typo (distance at
// most 1 for names up to 8 characters, 2 up to 16, else 3), else "". Ties: the first.
std::string_view nearestName(std::string_view name, const std::vector<std::string_view>& known);

}  // namespace atlas::options
