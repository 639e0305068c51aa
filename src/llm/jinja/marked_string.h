#pragma once
// A string that knows which of its bytes came from the data a template was given (the caller's
// variables: messages, tools, ...) rather than from the template's own text. A render keeps this
// so that the tokenizer reads control tokens (<|im_start|>, </s>, ...) only out of the template's
// literal text: a user's message can then never forge a turn or an end of text.
//
// Operations that move bytes (concatenation, slices, strip, split, replace, join, case mapping
// that keeps lengths) carry each byte's origin along. Anything else follows the conservative rule:
// if any input byte is data, every output byte is data.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::llm::jinja {

// Bytes [begin, end) of a string.
struct ByteRange {
  size_t begin = 0, end = 0;
  bool operator==(const ByteRange&) const = default;
};

class MarkedString {
 public:
  MarkedString() = default;
  explicit MarkedString(std::string text, bool from_data = false);

  const std::string& text() const noexcept { return text_; }
  size_t size() const noexcept { return text_.size(); }
  bool empty() const noexcept { return text_.empty(); }
  // The bytes that came from data: sorted, disjoint, never adjacent. Empty: all the template's own.
  const std::vector<ByteRange>& data() const noexcept { return data_; }
  bool has_data() const noexcept { return !data_.empty(); }
  // Whether any of the bytes [pos, pos + n) came from data.
  bool has_data_in(size_t pos, size_t n) const noexcept;

  void append(std::string_view s, bool from_data = false);
  void append(const MarkedString& s) { append(s, 0, s.size()); }
  // s's bytes [pos, pos + n), each keeping its origin.
  void append(const MarkedString& s, size_t pos, size_t n);
  MarkedString substr(size_t pos, size_t n) const;
  // `text`, made from this string by a byte-for-byte mapping when the lengths agree (ASCII case
  // changes): each byte keeps its origin. Otherwise all data when any byte here was.
  MarkedString remapped(std::string text) const;
  // The conservative rule, for results not tracked byte by byte.
  void mark_all_data();
  void reserve(size_t n) { text_.reserve(n); }

 private:
  void mark_(size_t begin, size_t end);  // a range at or after the last one

  std::string text_;
  std::vector<ByteRange> data_;
};

}  // namespace tessera::llm::jinja
