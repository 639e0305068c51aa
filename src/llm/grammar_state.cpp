// GrammarState (tessera/llm/grammar_state.h): stacks of grammar positions in an interned arena.
#include "tessera/llm/grammar_state.h"

#include <algorithm>

#include "core/check.h"
#include "llm/grammar_program.h"

namespace tessera::llm {

using grammar::SymbolKind;

namespace {

constexpr uint32_t kMinCodePoint[5] = {0, 0, 0x80, 0x800, 0x10000};

uint64_t mix(uint32_t pos, uint32_t parent) {
  uint64_t h = (uint64_t(pos) << 32 | parent) * 0x9E3779B97F4A7C15ull;
  return h ^ (h >> 29);
}

}  // namespace

GrammarState::GrammarState(std::shared_ptr<const Grammar> grammar)
    : grammar_(std::move(grammar)), program_(&grammar_->program()) {
  if (!grammar_) raise(ErrorCode::InvalidArgument, "GrammarState: no grammar");
  frames_.push_back({0, 0});
  table_.assign(1024, 0);
  new_round();
  std::vector<uint32_t> start;
  for (uint32_t a : program_->alternatives[program_->root])
    expand(program_->symbols[a].kind == SymbolKind::End ? 0 : intern(a, 0), start);
  std::sort(start.begin(), start.end());
  heads_.stacks = std::move(start);
}

size_t GrammarState::slot_of(uint32_t pos, uint32_t parent) const {
  const size_t mask = table_.size() - 1;
  size_t i = mix(pos, parent) & mask;
  while (table_[i] != 0) {
    const Frame& f = frames_[table_[i]];
    if (f.pos == pos && f.parent == parent) return i;
    i = (i + 1) & mask;
  }
  return i;
}

void GrammarState::grow_table() {
  std::vector<uint32_t> old(table_.size() * 2, 0);
  table_.swap(old);
  const size_t mask = table_.size() - 1;
  for (uint32_t id = 1; id < frames_.size(); ++id) {
    size_t i = mix(frames_[id].pos, frames_[id].parent) & mask;
    while (table_[i] != 0) i = (i + 1) & mask;
    table_[i] = id;
  }
}

uint32_t GrammarState::intern(uint32_t pos, uint32_t parent) {
  const size_t i = slot_of(pos, parent);
  if (table_[i] != 0) return table_[i];
  if (frames_.size() >= grammar_->limits().max_frames)
    raise(ErrorCode::InvalidArgument, "grammar: matching needs more than {} stack frames",
          grammar_->limits().max_frames);
  const auto id = static_cast<uint32_t>(frames_.size());
  frames_.push_back({pos, parent});
  seen_.push_back(0);
  table_[i] = id;
  if (frames_.size() * 2 > table_.size()) grow_table();
  return id;
}

void GrammarState::rollback(size_t mark) {
  const size_t mask = table_.size() - 1;
  while (frames_.size() > mark) {
    const auto id = static_cast<uint32_t>(frames_.size() - 1);
    // Backward-shift deletion keeps every other entry findable.
    size_t i = slot_of(frames_[id].pos, frames_[id].parent);
    size_t j = i;
    for (;;) {
      j = (j + 1) & mask;
      if (table_[j] == 0) break;
      const size_t home = mix(frames_[table_[j]].pos, frames_[table_[j]].parent) & mask;
      // Move table_[j] into the hole at i unless its home lies cyclically in (i, j].
      const bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
      if (!stays) {
        table_[i] = table_[j];
        i = j;
      }
    }
    table_[i] = 0;
    frames_.pop_back();
    seen_.pop_back();
  }
}

void GrammarState::new_round() {
  if (++round_ == 0) {
    std::fill(seen_.begin(), seen_.end(), 0);
    round_ = 1;
  }
  if (seen_.size() < frames_.size()) seen_.resize(frames_.size(), 0);
}

uint32_t GrammarState::after(uint32_t pos, uint32_t parent) {
  return program_->symbols[pos + 1].kind == SymbolKind::End ? parent : intern(pos + 1, parent);
}

// Adds to `out` every stack `stack` stands for once rule references on top are expanded (tops
// are then characters, or the stack is empty), each once per round.
void GrammarState::expand(uint32_t stack, std::vector<uint32_t>& out) {
  if (seen_[stack] == round_) return;
  seen_[stack] = round_;
  if (stack == 0) {
    out.push_back(0);
    return;
  }
  const Frame f = frames_[stack];
  const grammar::Symbol sym = program_->symbols[f.pos];
  if (sym.kind == SymbolKind::Chars) {
    out.push_back(stack);
    if (out.size() > grammar_->limits().max_stacks)
      raise(ErrorCode::InvalidArgument, "grammar: matching needs more than {} stacks (an ambiguous grammar?)",
            grammar_->limits().max_stacks);
    return;
  }
  const uint32_t base = after(f.pos, f.parent);
  for (uint32_t a : program_->alternatives[sym.arg])
    expand(program_->symbols[a].kind == SymbolKind::End ? base : intern(a, base), out);
}

void GrammarState::accept_code_point(const std::vector<uint32_t>& in, uint32_t cp,
                                     std::vector<uint32_t>& out) {
  new_round();
  for (uint32_t s : in) {
    if (s == 0) continue;
    const Frame f = frames_[s];
    if (!program_->sets[program_->symbols[f.pos].arg].contains(cp)) continue;
    expand(after(f.pos, f.parent), out);
  }
}

bool GrammarState::feasible(const Heads& h) const {
  const unsigned bits = 6u * h.need;
  uint32_t lo = h.partial << bits;
  uint32_t hi = lo | ((1u << bits) - 1);
  lo = std::max(lo, kMinCodePoint[h.length]);
  hi = std::min<uint32_t>(hi, 0x10FFFF);
  if (lo > hi || (lo >= 0xD800 && hi <= 0xDFFF)) return false;
  for (uint32_t s : h.stacks)
    if (s != 0 && program_->sets[program_->symbols[frames_[s].pos].arg].intersects(lo, hi)) return true;
  return false;
}

bool GrammarState::step(const Heads& in, uint8_t byte, Heads& out) {
  out.stacks.clear();
  out.partial = 0;
  out.need = 0;
  out.length = 0;
  if (in.need == 0) {
    if (byte < 0x80) {
      accept_code_point(in.stacks, byte, out.stacks);
      return !out.stacks.empty();
    }
    const int len = byte >= 0xC2 && byte <= 0xDF   ? 2
                    : byte >= 0xE0 && byte <= 0xEF ? 3
                    : byte >= 0xF0 && byte <= 0xF4 ? 4
                                                   : 0;
    if (len == 0) return false;
    out.partial = byte & (0xFFu >> (len + 1));
    out.need = static_cast<uint8_t>(len - 1);
    out.length = static_cast<uint8_t>(len);
  } else {
    if ((byte & 0xC0) != 0x80) return false;
    out.partial = (in.partial << 6) | (byte & 0x3Fu);
    out.need = static_cast<uint8_t>(in.need - 1);
    out.length = in.length;
    if (out.need == 0) {
      const uint32_t cp = out.partial;
      out.partial = 0;
      out.length = 0;
      if (cp < kMinCodePoint[in.length] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
      accept_code_point(in.stacks, cp, out.stacks);
      return !out.stacks.empty();
    }
  }
  out.stacks = in.stacks;
  if (!feasible(out)) {
    out.stacks.clear();
    return false;
  }
  return true;
}

bool GrammarState::accept(std::string_view bytes) {
  const size_t m = mark();
  Heads cur = heads_, next;
  for (char c : bytes) {
    if (!step(cur, uint8_t(c), next)) {
      rollback(m);
      return false;
    }
    std::swap(cur, next);
  }
  std::sort(cur.stacks.begin(), cur.stacks.end());
  heads_ = std::move(cur);
  return true;
}

bool GrammarState::accepts(std::string_view bytes) {
  const size_t m = mark();
  Heads cur = heads_, next;
  bool ok = true;
  for (char c : bytes) {
    if (!step(cur, uint8_t(c), next)) {
      ok = false;
      break;
    }
    std::swap(cur, next);
  }
  rollback(m);
  return ok;
}

bool GrammarState::complete() const noexcept {
  return heads_.need == 0 && std::find(heads_.stacks.begin(), heads_.stacks.end(), 0u) != heads_.stacks.end();
}

bool GrammarState::can_continue() const noexcept {
  return heads_.need != 0 ||
         std::any_of(heads_.stacks.begin(), heads_.stacks.end(), [](uint32_t s) { return s != 0; });
}

}  // namespace tessera::llm
