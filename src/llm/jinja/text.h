#pragma once
// UTF-8 helpers for the template interpreter: code points, and whitespace as JavaScript's \s and
// Python's str.isspace() both know it (ASCII blanks, U+00A0, U+1680, U+2000-U+200A, U+2028,
// U+2029, U+202F, U+205F, U+3000, U+FEFF), so that trim and strip treat Unicode spaces alike.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::llm::jinja {

inline constexpr uint32_t kInvalid = 0xFFFD;
// The code point at s[i] and its length in bytes; a byte that starts no well-formed sequence is a
// character of its own (kInvalid).
uint32_t decode_utf8(std::string_view s, size_t i, size_t* length);
void append_utf8(std::string& out, uint32_t cp);
// The string's characters, each as its UTF-8 bytes.
std::vector<std::string> split_characters(std::string_view s);
size_t count_characters(std::string_view s);

bool is_space(uint32_t cp);
// Length in bytes of the whitespace at the start of s[i:] / of the whitespace ending at s[:end].
size_t space_prefix(std::string_view s, size_t i = 0);
size_t space_suffix(std::string_view s, size_t end);

std::string_view trim(std::string_view s);
std::string_view trim_start(std::string_view s);
std::string_view trim_end(std::string_view s);
// Python's strip(chars): removes any of `chars`' characters from the ends (a view of s).
std::string_view strip_chars(std::string_view s, std::string_view chars, bool left, bool right);

std::string ascii_upper(std::string_view s);
std::string ascii_lower(std::string_view s);

}  // namespace tessera::llm::jinja
