#include "llm/jinja/text.h"

#include <algorithm>

namespace tessera::llm::jinja {

uint32_t decode_utf8(std::string_view s, size_t i, size_t* length) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[i + k]); };
  const uint8_t c = b(0);
  size_t n = 0;
  uint32_t cp = 0;
  if (c < 0x80) {
    *length = 1;
    return c;
  } else if ((c & 0xE0) == 0xC0) {
    n = 2, cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3, cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4, cp = c & 0x07;
  } else {
    *length = 1;
    return kInvalid;
  }
  if (i + n > s.size()) {
    *length = 1;
    return kInvalid;
  }
  for (size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xC0) != 0x80) {
      *length = 1;
      return kInvalid;
    }
    cp = (cp << 6) | (b(k) & 0x3F);
  }
  *length = n;
  return cp;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::vector<std::string> split_characters(std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t n = 0;
    decode_utf8(s, i, &n);
    out.emplace_back(s.substr(i, n));
    i += n;
  }
  return out;
}

size_t count_characters(std::string_view s) {
  size_t count = 0;
  for (size_t i = 0; i < s.size();) {
    size_t n = 0;
    decode_utf8(s, i, &n);
    i += n;
    ++count;
  }
  return count;
}

bool is_space(uint32_t cp) {
  if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return true;
  if (cp < 0x80) return false;
  return cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000 || cp == 0xFEFF;
}

size_t space_prefix(std::string_view s, size_t i) {
  const size_t start = i;
  while (i < s.size()) {
    size_t n = 0;
    if (!is_space(decode_utf8(s, i, &n))) break;
    i += n;
  }
  return i - start;
}

size_t space_suffix(std::string_view s, size_t end) {
  size_t i = end;
  while (i > 0) {
    // The character ending at i: back over at most three continuation bytes to its lead byte.
    size_t j = i - 1;
    while (j > 0 && i - j < 4 && (static_cast<uint8_t>(s[j]) & 0xC0) == 0x80) --j;
    size_t n = 0;
    uint32_t cp = decode_utf8(s, j, &n);
    if (j + n != i) j = i - 1, cp = kInvalid;
    if (!is_space(cp)) break;
    i = j;
  }
  return end - i;
}

std::string_view trim_start(std::string_view s) { return s.substr(space_prefix(s)); }
std::string_view trim_end(std::string_view s) { return s.substr(0, s.size() - space_suffix(s, s.size())); }
std::string_view trim(std::string_view s) { return trim_end(trim_start(s)); }

std::string_view strip_chars(std::string_view s, std::string_view chars, bool left, bool right) {
  const std::vector<std::string> set = split_characters(chars);
  const std::vector<std::string> cs = split_characters(s);
  const auto in_set = [&](const std::string& c) { return std::find(set.begin(), set.end(), c) != set.end(); };
  size_t b = 0, e = cs.size(), from = 0, to = s.size();
  if (left)
    while (b < e && in_set(cs[b])) from += cs[b++].size();
  if (right)
    while (e > b && in_set(cs[e - 1])) to -= cs[--e].size();
  return s.substr(from, to - from);
}

std::string ascii_upper(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return out;
}

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

}  // namespace tessera::llm::jinja
