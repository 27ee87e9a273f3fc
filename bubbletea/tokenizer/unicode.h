// UTF-8 and Unicode helpers of the tokenizer: validation and decoding, the GPT-2 byte-level
// alphabet, Unicode normalization (utf8proc) and the character classes the Hugging Face
// `tokenizers` pipeline relies on (Rust's char::is_whitespace, regex \w, char::is_numeric).
//
// Threads: pure functions; any thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "atlas/common/status.h"

namespace atlas::bubbletea::tok {

// Offset of the first byte that does not start a well-formed UTF-8 sequence (overlong forms,
// surrogates and code points above U+10FFFF are ill-formed), or text.size() when it is all
// well-formed.
size_t firstInvalidUtf8(std::string_view text);

// Decodes the code point at `pos` of well-formed UTF-8 and returns its length in bytes (1-4).
int decodeUtf8(std::string_view text, size_t pos, char32_t* cp);
void appendUtf8(char32_t cp, std::string* out);

// Replaces every maximal ill-formed subsequence with U+FFFD (the WHATWG / Rust
// String::from_utf8_lossy rule), so the result is always valid UTF-8.
std::string utf8Lossy(std::string_view bytes);

// GPT-2's bytes_to_unicode(): each byte is shown as one printable code point (printable
// Latin-1 bytes as themselves, the other 68 bytes as U+0100..U+0143 in order). Byte-level
// vocabularies spell their tokens in this alphabet.
char32_t byteToUnicode(uint8_t b);
// The inverse, or -1 for a code point outside the alphabet.
int unicodeToByte(char32_t cp);

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };
// Normalizes well-formed UTF-8 (Unicode version of the installed utf8proc).
Result<std::string> normalize(std::string_view text, NormalForm form);
// Lowercases code point by code point (Rust char::to_lowercase: U+0130 becomes "i\u0307").
std::string lowercase(std::string_view text);

// Rust char::is_whitespace (the White_Space property): the rule of added tokens'
// lstrip/rstrip.
bool isWhitespace(char32_t cp);
// A "word" character for added tokens' single_word (letters, marks, decimal digits,
// connector punctuation: regex \w).
bool isWordChar(char32_t cp);
// Rust char::is_numeric (Nd, Nl, No): the Digits pre-tokenizer's rule.
bool isNumeric(char32_t cp);

}  // namespace atlas::bubbletea::tok
