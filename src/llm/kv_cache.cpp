#include "tessera/llm/kv_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "core/check.h"
#include "tessera/llm/model.h"

namespace tessera::llm {
namespace {

size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

bool in_range(Pos pos, Pos p0, Pos p1) { return (p0 < 0 || pos >= p0) && (p1 < 0 || pos < p1); }

}  // namespace

bool KvCell::has(SeqId s) const noexcept { return std::binary_search(seqs.begin(), seqs.end(), s); }

KvCache::KvCache(int64_t n_cells) {
  if (n_cells <= 0) raise(ErrorCode::InvalidArgument, "KV cache size must be positive, got {}", n_cells);
  cells_.resize(static_cast<size_t>(n_cells));
}

KvCache::KvCache(const Model& model, int64_t n_cells, DType type) : KvCache(n_cells) {
  if (type != DType::F16 && type != DType::F32)
    raise(ErrorCode::InvalidArgument, "KV cache type must be f16 or f32, got {}", name(type));
  type_ = type;
  const Hparams& h = model.hparams();
  const int64_t n_embd_kv = h.n_embd_kv(), n_embd_v_kv = h.n_embd_v_kv();
  std::vector<Tensor*> host;
  std::vector<std::vector<Tensor*>> on_device(model.devices().size());  // per device of the model's
  k_.assign(static_cast<size_t>(h.n_layer), nullptr);
  v_.assign(static_cast<size_t>(h.n_layer), nullptr);
  for (int64_t il = model.first_layer(); il < model.end_layer(); ++il) {
    Tensor* k = ctx_.new_tensor(type, n_embd_kv, n_cells);
    Tensor* v = ctx_.new_tensor(type, n_cells, n_embd_v_kv);
    k->name = fmt::format("cache_k.{}", il);
    v->name = fmt::format("cache_v.{}", il);
    k_[static_cast<size_t>(il)] = k;
    v_[static_cast<size_t>(il)] = v;
    // Each layer's cells live with its weights (on the device of its range when layers are split).
    Device* d = model.layer_device(il);
    auto& list =
        d == nullptr
            ? host
            : on_device[static_cast<size_t>(std::find(model.devices().begin(), model.devices().end(), d) -
                                            model.devices().begin())];
    list.push_back(k);
    list.push_back(v);
  }
  auto place_all = [&](BufferType& buffer_type, const std::vector<Tensor*>& tensors) {
    if (tensors.empty()) return;
    size_t total = 0;
    for (const Tensor* t : tensors) total += align_up(buffer_type.alloc_size(*t), buffer_type.alignment());
    buffers_.push_back(buffer_type.allocate(total));
    buffers_.back()->clear(0);
    size_t offset = 0;
    for (Tensor* t : tensors) {
      buffers_.back()->place(*t, offset);
      offset += align_up(buffer_type.alloc_size(*t), buffer_type.alignment());
    }
  };
  place_all(host_buffer_type(), host);
  for (size_t i = 0; i < on_device.size(); ++i) place_all(model.devices()[i]->buffer_type(), on_device[i]);
}

KvCache::~KvCache() = default;

Tensor* KvCache::k(int64_t il) const {
  if (il < 0 || il >= static_cast<int64_t>(k_.size()) || k_[static_cast<size_t>(il)] == nullptr)
    raise(ErrorCode::InvalidArgument, "KV cache has no K tensor for layer {} ({} layers)", il, k_.size());
  return k_[static_cast<size_t>(il)];
}

Tensor* KvCache::v(int64_t il) const {
  if (il < 0 || il >= static_cast<int64_t>(v_.size()) || v_[static_cast<size_t>(il)] == nullptr)
    raise(ErrorCode::InvalidArgument, "KV cache has no V tensor for layer {} ({} layers)", il, v_.size());
  return v_[static_cast<size_t>(il)];
}

std::vector<int32_t> KvCache::save_cells() const {
  std::vector<int32_t> out{static_cast<int32_t>(size()), static_cast<int32_t>(n_ranges_),
                           needs_k_shift_ ? 1 : 0};
  for (const KvCell& c : cells_) {
    out.push_back(c.pos);
    out.push_back(c.shift);
    out.push_back(static_cast<int32_t>(c.seqs.size()));
    out.insert(out.end(), c.seqs.begin(), c.seqs.end());
  }
  return out;
}

void KvCache::load_cells(std::span<const int32_t> numbers) {
  size_t at = 0;
  const auto next = [&] {
    if (at >= numbers.size()) raise(ErrorCode::InvalidArgument, "KV cells: the numbers end at {}", at);
    return numbers[at++];
  };
  if (const int32_t n = next(); n != size())
    raise(ErrorCode::InvalidArgument, "KV cells: {} cells given for a cache of {}", n, size());
  const int32_t ranges = next();
  const int32_t shift = next();
  if (ranges < 0 || ranges > size() || (shift != 0 && shift != 1))
    raise(ErrorCode::InvalidArgument, "KV cells: malformed header");
  std::vector<KvCell> cells(cells_.size());
  int64_t used = 0;
  for (KvCell& c : cells) {
    c.pos = next();
    c.shift = next();
    const int32_t n = next();
    if (n < 0 || static_cast<size_t>(n) > numbers.size() - at)
      raise(ErrorCode::InvalidArgument, "KV cells: malformed cell");
    c.seqs.assign(numbers.begin() + static_cast<std::ptrdiff_t>(at),
                  numbers.begin() + static_cast<std::ptrdiff_t>(at + n));
    at += static_cast<size_t>(n);
    if (!std::is_sorted(c.seqs.begin(), c.seqs.end()) ||
        std::adjacent_find(c.seqs.begin(), c.seqs.end()) != c.seqs.end() ||
        (!c.seqs.empty() && c.seqs.front() < 0))
      raise(ErrorCode::InvalidArgument, "KV cells: a cell's sequences are not sorted, unique ids");
    used += c.free() ? 0 : 1;
  }
  if (at != numbers.size())
    raise(ErrorCode::InvalidArgument, "KV cells: {} numbers too many", numbers.size() - at);
  cells_ = std::move(cells);
  used_ = used;
  n_ranges_ = ranges;
  needs_k_shift_ = shift != 0;
}

int64_t KvCache::used_end() const noexcept {
  for (int64_t i = size(); i > 0; --i)
    if (!cells_[static_cast<size_t>(i - 1)].free()) return i;
  return 0;
}

namespace {

// n cells among those `available` says are: the first contiguous run that fits (it keeps a batch's
// K/V stores to one copy per layer), else the first ones in order. Fewer when fewer are available.
template <typename Available>
std::vector<int64_t> place(int64_t size, int64_t n, Available available) {
  std::vector<int64_t> out;
  int64_t run = 0;
  for (int64_t i = 0; i < size; ++i) {
    run = available(i) ? run + 1 : 0;
    if (run == n) {
      for (int64_t j = i - n + 1; j <= i; ++j) out.push_back(j);
      return out;
    }
  }
  for (int64_t i = 0; i < size && static_cast<int64_t>(out.size()) < n; ++i)
    if (available(i)) out.push_back(i);
  return out;
}

}  // namespace

std::vector<int64_t> KvCache::find_slots(int64_t n) const {
  if (n <= 0 || n > size() - used_) return {};
  return place(size(), n, [&](int64_t i) { return cells_[static_cast<size_t>(i)].free(); });
}

std::vector<int64_t> KvCache::find_slots(std::span<const SeqId> seqs) const {
  const auto n = static_cast<int64_t>(seqs.size());
  if (n_ranges_ == 0) return find_slots(n);
  if (n <= 0 || n > size() - used_) return {};
  std::vector<int64_t> out(seqs.size(), -1);
  std::vector<char> taken(cells_.size(), 0);
  std::vector<int64_t> cursor(static_cast<size_t>(n_ranges_), -1);  // the next cell to look at
  int64_t rest = 0;
  for (size_t t = 0; t < seqs.size(); ++t) {
    const SeqId s = seqs[t];
    if (s >= 0 && s < n_ranges_) {
      int64_t& c = cursor[static_cast<size_t>(s)];
      const int64_t end = (s + 1) * size() / n_ranges_;
      if (c < 0) c = s * size() / n_ranges_;
      while (c < end && !cells_[static_cast<size_t>(c)].free()) ++c;
      if (c < end) {
        out[t] = c;
        taken[static_cast<size_t>(c++)] = 1;
        continue;
      }
    }
    ++rest;
  }
  if (rest == 0) return out;
  const std::vector<int64_t> others = place(size(), rest, [&](int64_t i) {
    return cells_[static_cast<size_t>(i)].free() && taken[static_cast<size_t>(i)] == 0;
  });
  TESSERA_ASSERT(static_cast<int64_t>(others.size()) == rest);  // n <= the free cells
  size_t k = 0;
  for (int64_t& c : out)
    if (c < 0) c = others[k++];
  return out;
}

void KvCache::set_seq_ranges(int64_t n) {
  if (n < 0 || n > size())
    raise(ErrorCode::InvalidArgument, "KV cache of {} cells: {} sequence ranges asked", size(), n);
  n_ranges_ = n;
}

void KvCache::store(std::span<const int64_t> cells, std::span<const Pos> positions,
                    std::span<const SeqId> seqs) {
  if (cells.size() != positions.size() || cells.size() != seqs.size())
    raise(ErrorCode::InvalidArgument, "KV store: {} cells for {} positions and {} sequence ids", cells.size(),
          positions.size(), seqs.size());
  for (size_t t = 0; t < cells.size(); ++t) {
    if (cells[t] < 0 || cells[t] >= size())
      raise(ErrorCode::InvalidArgument, "KV store: cell {} outside the cache of {}", cells[t], size());
    if (positions[t] < 0 || seqs[t] < 0)
      raise(ErrorCode::InvalidArgument, "KV store: position {} and sequence {} must be >= 0", positions[t],
            seqs[t]);
    KvCell& c = cells_[static_cast<size_t>(cells[t])];
    if (!c.free()) raise(ErrorCode::InvalidArgument, "KV store: cell {} is in use", cells[t]);
    c.pos = positions[t];
    c.shift = 0;
    c.seqs = {seqs[t]};
    ++used_;
  }
}

void KvCache::seq_remove(SeqId s, Pos p0, Pos p1) {
  for (KvCell& c : cells_) {
    if (c.free() || !in_range(c.pos, p0, p1)) continue;
    if (s < 0) {
      c.seqs.clear();
    } else {
      auto it = std::lower_bound(c.seqs.begin(), c.seqs.end(), s);
      if (it == c.seqs.end() || *it != s) continue;
      c.seqs.erase(it);
    }
    if (c.free()) {
      c.pos = -1;
      c.shift = 0;
      --used_;
    }
  }
}

void KvCache::seq_copy(SeqId src, SeqId dst, Pos p0, Pos p1) {
  if (src < 0 || dst < 0) raise(ErrorCode::InvalidArgument, "KV copy: sequence ids must be >= 0");
  if (src == dst) return;
  for (KvCell& c : cells_) {
    if (!c.has(src) || !in_range(c.pos, p0, p1) || c.has(dst)) continue;
    c.seqs.insert(std::lower_bound(c.seqs.begin(), c.seqs.end(), dst), dst);
  }
}

void KvCache::seq_keep(SeqId s) {
  for (KvCell& c : cells_) {
    if (c.free()) continue;
    if (c.has(s)) {
      c.seqs = {s};
    } else {
      c.seqs.clear();
      c.pos = -1;
      c.shift = 0;
      --used_;
    }
  }
}

void KvCache::clear() {
  for (KvCell& c : cells_) c = KvCell{};
  used_ = 0;
  needs_k_shift_ = false;
}

void KvCache::seq_shift(SeqId s, Pos p0, Pos p1, Pos delta) {
  if (delta == 0) return;
  for (KvCell& c : cells_) {
    if (!c.has(s) || !in_range(c.pos, p0, p1)) continue;
    c.pos += delta;
    c.shift += delta;
    needs_k_shift_ = true;
    if (c.pos < 0) {
      c = KvCell{};
      --used_;
    }
  }
}

void KvCache::k_shift_done() {
  for (KvCell& c : cells_) c.shift = 0;
  needs_k_shift_ = false;
}

Pos KvCache::seq_pos_max(SeqId s) const {
  Pos m = -1;
  for (const KvCell& c : cells_)
    if (c.has(s)) m = std::max(m, c.pos);
  return m;
}

Pos KvCache::seq_pos_min(SeqId s) const {
  Pos m = -1;
  for (const KvCell& c : cells_)
    if (c.has(s) && (m < 0 || c.pos < m)) m = c.pos;
  return m;
}

void KvCache::fill_mask(std::span<const Pos> positions, std::span<const SeqId> seqs, int64_t n_kv,
                        int32_t window, float* out) const {
  if (positions.size() != seqs.size())
    raise(ErrorCode::InvalidArgument, "KV mask: {} positions for {} sequence ids", positions.size(),
          seqs.size());
  if (n_kv <= 0 || n_kv > size())
    raise(ErrorCode::InvalidArgument, "KV mask: {} cells asked of a cache of {}", n_kv, size());
  constexpr float kHidden = -std::numeric_limits<float>::infinity();
  // Each cell's only sequence (-1: free, -2: several): a step's mask reads every cell once per
  // token, and a server's batch has a token per slot over a cache of all the slots' cells.
  constexpr SeqId kShared = -2;
  std::vector<SeqId> owner(static_cast<size_t>(n_kv));
  for (int64_t j = 0; j < n_kv; ++j) {
    const KvCell& c = cells_[static_cast<size_t>(j)];
    owner[static_cast<size_t>(j)] = c.seqs.empty() ? -1 : c.seqs.size() == 1 ? c.seqs[0] : kShared;
  }
  for (size_t t = 0; t < positions.size(); ++t) {
    const Pos p = positions[t];
    const SeqId s = seqs[t];
    float* row = out + t * static_cast<size_t>(n_kv);
    for (int64_t j = 0; j < n_kv; ++j) {
      const SeqId o = owner[static_cast<size_t>(j)];
      bool visible = s >= 0 && (o == s || (o == kShared && cells_[static_cast<size_t>(j)].has(s)));
      if (visible) {
        const Pos cp = cells_[static_cast<size_t>(j)].pos;
        visible = cp <= p && (window <= 0 || p - cp < window);
      }
      row[j] = visible ? 0.0f : kHidden;
    }
  }
}

}  // namespace tessera::llm
