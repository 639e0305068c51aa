#pragma once
// The KV cache: each layer's K and V tensors, and the cells that say which position and which
// sequences each cache slot holds. Several sequences share one cache (a server's slots); a
// sequence may share cells with another (a common prompt prefix).
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "tessera/buffer.h"
#include "tessera/context.h"
#include "tessera/dtype.h"
#include "tessera/llm/batch.h"

namespace tessera::llm {

class Model;

// One cache slot: the position it holds and the sequences that see it (none: the cell is free).
struct KvCell {
  Pos pos = -1;
  Pos shift = 0;            // added to pos since its K was roped (see KvCache::needs_k_shift)
  std::vector<SeqId> seqs;  // sorted, unique

  bool has(SeqId s) const noexcept;
  bool free() const noexcept { return seqs.empty(); }
};

class KvCache {
 public:
  // n_cells slots for every layer of `model` (of a pipeline stage: its layers), K and V in `type`
  // (F16 or F32); each layer's cache lives where that layer's weights live (host memory or the
  // model's device), zero-filled.
  KvCache(const Model& model, int64_t n_cells, DType type = DType::F16);
  // Cells only, no tensors: the bookkeeping and masks without a model.
  explicit KvCache(int64_t n_cells);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  int64_t size() const noexcept { return static_cast<int64_t>(cells_.size()); }
  DType type() const noexcept { return type_; }
  // Layer il's K: [n_embd_kv, n_cells], one row per cell. V: [n_cells, n_embd_v_kv], transposed so
  // that attention reads each V^T row contiguously: FLASH_ATTN_EXT gets V through a transposed view
  // of it, which the CPU's composed kernels, its online softmax and the scheduler's decomposition
  // all read in place (saved sessions keep this layout). Throws when the cache has no tensors for
  // the layer.
  Tensor* k(int64_t il) const;
  Tensor* v(int64_t il) const;

  const KvCell& cell(int64_t i) const { return cells_.at(static_cast<size_t>(i)); }
  int64_t used() const noexcept { return used_; }  // cells holding at least one sequence
  // One past the highest cell in use: a graph attends to cells [0, used_end()).
  int64_t used_end() const noexcept;

  // Free cells for n tokens, the first contiguous run that fits, else the first free cells in
  // order. Empty when fewer than n cells are free. Changes nothing.
  std::vector<int64_t> find_slots(int64_t n) const;
  // Free cells for a batch's tokens (token t of sequence seqs[t]): a token of a sequence with a
  // home range (set_seq_ranges) takes the lowest free cell of that range, so that the sequence's
  // cells stay together and attention can skip the others' (FLASH_ATTN_EXT's span per query row);
  // the other tokens, and those whose range is full, go where find_slots(n) would put them among
  // the cells left. Without ranges it is find_slots(seqs.size()). Empty when too few cells are free.
  std::vector<int64_t> find_slots(std::span<const SeqId> seqs) const;
  // Sequence s < n gets [s * size() / n, (s + 1) * size() / n) as its home range (a server's slot
  // and its share of the cache); 0 removes the ranges. Cells in use stay where they are.
  void set_seq_ranges(int64_t n);
  int64_t seq_ranges() const noexcept { return n_ranges_; }
  // Records token t (positions[t], seqs[t]) in cells[t]; every cell must be free.
  void store(std::span<const int64_t> cells, std::span<const Pos> positions, std::span<const SeqId> seqs);

  // Sequence ranges are [p0, p1) of positions; p0 < 0 means from 0, p1 < 0 means to the end.
  // Removes sequence s (s < 0: every sequence) from the cells in the range.
  void seq_remove(SeqId s, Pos p0, Pos p1);
  // Lets dst see src's cells in the range too (no K/V is copied: the cells are shared).
  void seq_copy(SeqId src, SeqId dst, Pos p0, Pos p1);
  // Removes every sequence but s.
  void seq_keep(SeqId s);
  void seq_clear(SeqId s) { seq_remove(s, -1, -1); }
  void clear();
  // Adds delta to the positions of s's cells in the range (a cell shared with other sequences
  // moves for them too). A cell moved below 0 is freed. K was roped at the old positions, so
  // needs_k_shift() is true until the owner re-ropes K by each cell's shift and calls
  // k_shift_done().
  void seq_shift(SeqId s, Pos p0, Pos p1, Pos delta);
  bool needs_k_shift() const noexcept { return needs_k_shift_; }
  void k_shift_done();

  // The cells' bookkeeping (each cell's position, shift and sequences, the home ranges, whether K
  // awaits re-roping) as numbers, and back: a pipeline's later stages mirror the first stage's
  // cells with it, so that each stage's cache places a batch in the same cells. load_cells throws
  // Error(InvalidArgument) on numbers that are not a cache of this size.
  std::vector<int32_t> save_cells() const;
  void load_cells(std::span<const int32_t> numbers);

  Pos seq_pos_max(SeqId s) const;  // -1 when s holds no cell
  Pos seq_pos_min(SeqId s) const;  // -1 when s holds no cell

  // The attention mask of a batch over cells [0, n_kv), row-major [n_tokens][n_kv]: token t of
  // sequence seqs[t] at positions[t] sees cell j (0) iff j holds that sequence at a position <=
  // positions[t] and, when window > 0, positions[t] - pos < window; else -inf.
  void fill_mask(std::span<const Pos> positions, std::span<const SeqId> seqs, int64_t n_kv, int32_t window,
                 float* out) const;

 private:
  std::vector<KvCell> cells_;
  int64_t used_ = 0;
  int64_t n_ranges_ = 0;
  bool needs_k_shift_ = false;
  DType type_ = DType::F16;
  Context ctx_;
  std::vector<Tensor*> k_, v_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
};

}  // namespace tessera::llm
