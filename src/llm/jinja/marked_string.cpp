#include "llm/jinja/marked_string.h"

#include <algorithm>

namespace tessera::llm::jinja {

MarkedString::MarkedString(std::string text, bool from_data) : text_(std::move(text)) {
  if (from_data) mark_(0, text_.size());
}

bool MarkedString::has_data_in(size_t pos, size_t n) const noexcept {
  if (n == 0) return false;
  // The first range ending after pos is the only one that can start before pos + n first.
  const auto it = std::upper_bound(data_.begin(), data_.end(), pos,
                                   [](size_t p, const ByteRange& r) { return p < r.end; });
  return it != data_.end() && it->begin < pos + n;
}

void MarkedString::mark_(size_t begin, size_t end) {
  if (begin >= end) return;
  if (!data_.empty() && data_.back().end >= begin) {
    data_.back().end = std::max(data_.back().end, end);
    return;
  }
  data_.push_back({begin, end});
}

void MarkedString::append(std::string_view s, bool from_data) {
  const size_t at = text_.size();
  text_.append(s);
  if (from_data) mark_(at, text_.size());
}

void MarkedString::append(const MarkedString& s, size_t pos, size_t n) {
  pos = std::min(pos, s.size());
  n = std::min(n, s.size() - pos);
  const size_t at = text_.size();
  text_.append(s.text_, pos, n);
  const auto first = std::upper_bound(s.data_.begin(), s.data_.end(), pos,
                                      [](size_t p, const ByteRange& r) { return p < r.end; });
  for (auto it = first; it != s.data_.end() && it->begin < pos + n; ++it)
    mark_(at + std::max(it->begin, pos) - pos, at + std::min(it->end, pos + n) - pos);
}

MarkedString MarkedString::substr(size_t pos, size_t n) const {
  MarkedString out;
  out.append(*this, pos, n);
  return out;
}

MarkedString MarkedString::remapped(std::string text) const {
  MarkedString out(std::move(text));
  if (out.size() == size())
    out.data_ = data_;
  else if (has_data())
    out.mark_all_data();
  return out;
}

void MarkedString::mark_all_data() {
  data_.clear();
  mark_(0, text_.size());
}

}  // namespace tessera::llm::jinja
