#pragma once
// GPT-2's byte-level alphabet: each of the 256 byte values stands for one printable Unicode
// character (printable Latin-1 bytes for themselves, the rest for U+0100 onwards in byte order), so
// byte-level BPE vocabularies hold no raw spaces, control bytes or partial UTF-8.
#include <cstdint>
#include <string>
#include <string_view>

namespace tessera::llm::byte_level {

// The character that stands for byte b.
char32_t char_for_byte(uint8_t b);
// The UTF-8 text of that character (one or two bytes).
std::string_view utf8_for_byte(uint8_t b);
// Appends, for every byte of `bytes`, the UTF-8 of the character standing for it.
void append_encoded(std::string_view bytes, std::string& out);
// Appends the bytes that a byte-level text stands for. A character outside the alphabet (as in
// tokens added by hand) is kept as its own UTF-8, and so is any invalid UTF-8.
void append_decoded(std::string_view text, std::string& out);

}  // namespace tessera::llm::byte_level
