// KvCache bookkeeping (cells, sequences, positions) and attention masks, against hand-computed values.
#include "tessera/llm/kv_cache.h"

#include <gtest/gtest.h>

#include <limits>

#include "tessera/error.h"
#include "tessera/llm/model.h"

using namespace tessera;
using namespace tessera::llm;

namespace {

constexpr float H = -std::numeric_limits<float>::infinity();  // hidden

std::vector<float> mask_of(const KvCache& c, std::vector<Pos> pos, std::vector<SeqId> seq, int64_t n_kv,
                           int32_t window = 0) {
  std::vector<float> m(pos.size() * static_cast<size_t>(n_kv), 1.0f);
  c.fill_mask(pos, seq, n_kv, window, m.data());
  return m;
}

void store(KvCache& c, std::vector<int64_t> cells, std::vector<Pos> pos, std::vector<SeqId> seq) {
  c.store(cells, pos, seq);
}

}  // namespace

TEST(KvCache, FindsSlotsAndTracksSequences) {
  KvCache c(8);
  EXPECT_EQ(c.find_slots(3), (std::vector<int64_t>{0, 1, 2}));
  store(c, {0, 1, 2}, {0, 1, 2}, {0, 0, 0});
  EXPECT_EQ(c.find_slots(2), (std::vector<int64_t>{3, 4}));
  store(c, {3, 4}, {0, 1}, {1, 1});
  EXPECT_EQ(c.used(), 5);
  EXPECT_EQ(c.used_end(), 5);
  EXPECT_EQ(c.seq_pos_max(0), 2);
  EXPECT_EQ(c.seq_pos_min(0), 0);
  EXPECT_EQ(c.seq_pos_max(1), 1);
  EXPECT_EQ(c.seq_pos_max(2), -1);
  EXPECT_EQ(c.cell(3).pos, 0);
  EXPECT_TRUE(c.cell(3).has(1));
  EXPECT_FALSE(c.cell(3).has(0));

  // Positions 1.. of sequence 0 go: cells 1 and 2 are free again.
  c.seq_remove(0, 1, -1);
  EXPECT_EQ(c.used(), 3);
  EXPECT_EQ(c.seq_pos_max(0), 0);
  EXPECT_TRUE(c.cell(1).free());
  EXPECT_EQ(c.find_slots(2), (std::vector<int64_t>{1, 2}));
  // The first contiguous run that fits, else the first free cells in order, else nothing.
  EXPECT_EQ(c.find_slots(3), (std::vector<int64_t>{5, 6, 7}));
  EXPECT_EQ(c.find_slots(4), (std::vector<int64_t>{1, 2, 5, 6}));
  EXPECT_TRUE(c.find_slots(6).empty());

  // Sequence 2 shares sequence 1's cells; removing 1 keeps them for 2.
  c.seq_copy(1, 2, -1, -1);
  EXPECT_EQ(c.cell(4).seqs, (std::vector<SeqId>{1, 2}));
  EXPECT_EQ(c.seq_pos_max(2), 1);
  EXPECT_EQ(c.used(), 3);
  c.seq_remove(1, -1, -1);
  EXPECT_EQ(c.used(), 3);
  EXPECT_EQ(c.cell(4).seqs, (std::vector<SeqId>{2}));
  c.seq_keep(2);
  EXPECT_EQ(c.used(), 2);
  EXPECT_TRUE(c.cell(0).free());

  // Shifts move positions, record the K shift, and free cells moved below 0.
  EXPECT_FALSE(c.needs_k_shift());
  c.seq_shift(2, -1, -1, 10);
  EXPECT_EQ(c.cell(3).pos, 10);
  EXPECT_EQ(c.cell(4).pos, 11);
  EXPECT_EQ(c.cell(4).shift, 10);
  EXPECT_TRUE(c.needs_k_shift());
  EXPECT_EQ(c.seq_pos_min(2), 10);
  c.seq_shift(2, 11, -1, -20);
  EXPECT_TRUE(c.cell(4).free());
  EXPECT_EQ(c.used(), 1);
  EXPECT_EQ(c.used_end(), 4);
  c.k_shift_done();
  EXPECT_FALSE(c.needs_k_shift());
  EXPECT_EQ(c.cell(3).shift, 0);

  c.clear();
  EXPECT_EQ(c.used(), 0);
  EXPECT_EQ(c.used_end(), 0);
  EXPECT_EQ(c.seq_pos_max(2), -1);
}

TEST(KvCache, MaskFollowsSequencesAndPositions) {
  KvCache c(8);
  store(c, {0, 1, 2, 3, 4}, {0, 1, 2, 0, 1}, {0, 0, 0, 1, 1});
  // seq 0 at 2 sees its cells 0..2; seq 1 at 1 sees 3, 4; seq 0 at 1 sees 0, 1. Free cell 5 is hidden.
  const std::vector<float> expected = {0, 0, 0, H, H, H,  //
                                       H, H, H, 0, 0, H,  //
                                       0, 0, H, H, H, H};
  EXPECT_EQ(mask_of(c, {2, 1, 1}, {0, 1, 0}, 6), expected);
  // A sequence that shares cells sees them.
  c.seq_copy(1, 7, -1, -1);
  EXPECT_EQ(mask_of(c, {5}, {7}, 6), (std::vector<float>{H, H, H, 0, 0, H}));
  // A sequence with no cells sees nothing.
  EXPECT_EQ(mask_of(c, {5}, {3}, 6), (std::vector<float>(6, H)));
}

TEST(KvCache, MaskWithSlidingWindow) {
  KvCache c(8);
  store(c, {0, 1, 2, 3, 4, 5}, {0, 1, 2, 3, 4, 5}, {0, 0, 0, 0, 0, 0});
  // Window 3: position 5 sees 3, 4, 5 (5 - 2 = 3 is out); position 2 sees 0, 1, 2.
  EXPECT_EQ(mask_of(c, {5, 2}, {0, 0}, 8, 3), (std::vector<float>{H, H, H, 0, 0, 0, H, H,  //
                                                                  0, 0, 0, H, H, H, H, H}));
  // No window: position 5 sees all six.
  EXPECT_EQ(mask_of(c, {5}, {0}, 8), (std::vector<float>{0, 0, 0, 0, 0, 0, H, H}));
  // Window 1: only the token's own position.
  EXPECT_EQ(mask_of(c, {4}, {0}, 6, 1), (std::vector<float>{H, H, H, H, 0, H}));
}

// With home ranges (a server's slots), each sequence's tokens go to the lowest free cells of its own
// range, so that its cells stay together however the slots' tokens interleave in the batches.
TEST(KvCache, SequencesKeepToTheirHomeRanges) {
  KvCache c(12);
  c.set_seq_ranges(3);  // sequence 0: cells 0-3, 1: 4-7, 2: 8-11
  EXPECT_EQ(c.seq_ranges(), 3);
  const std::vector<SeqId> prompt{1, 1, 1};
  EXPECT_EQ(c.find_slots(prompt), (std::vector<int64_t>{4, 5, 6}));
  store(c, {4, 5, 6}, {0, 1, 2}, {1, 1, 1});
  // A step with one token per sequence: each in its own range.
  const std::vector<SeqId> step{0, 1, 2};
  EXPECT_EQ(c.find_slots(step), (std::vector<int64_t>{0, 7, 8}));
  store(c, {0, 7, 8}, {0, 3, 0}, {0, 1, 2});
  // Sequence 1's range is full: its token goes to the first free cell the batch's others left
  // (sequence 0 took cell 1, the lowest free one of its range).
  const std::vector<SeqId> full{0, 1};
  EXPECT_EQ(c.find_slots(full), (std::vector<int64_t>{1, 2}));
  // A sequence without a range (3) goes where find_slots(n) would, among the cells left.
  const std::vector<SeqId> other{3, 3};
  EXPECT_EQ(c.find_slots(other), c.find_slots(2));
  EXPECT_EQ(c.find_slots(other), (std::vector<int64_t>{1, 2}));
  // Freed cells in the middle of a range are taken again first, low to high.
  c.seq_remove(1, 1, 2);  // cell 5
  EXPECT_EQ(c.find_slots(std::vector<SeqId>{1, 1}), (std::vector<int64_t>{5, 1}));
  // Too many tokens for the free cells: nothing.
  EXPECT_TRUE(c.find_slots(std::vector<SeqId>(8, 2)).empty());
  // Without ranges: find_slots(n).
  c.set_seq_ranges(0);
  EXPECT_EQ(c.find_slots(step), c.find_slots(3));
  EXPECT_THROW(c.set_seq_ranges(13), Error);
  EXPECT_THROW(c.set_seq_ranges(-1), Error);
}

// The mask reads each cell's sequences however they are shared: one sequence, several, none.
TEST(KvCache, MaskOverSharedAndFreeCells) {
  KvCache c(6);
  store(c, {0, 1, 3, 4}, {0, 1, 0, 1}, {0, 0, 1, 1});
  c.seq_copy(0, 2, 0, 1);  // cell 0: sequences 0 and 2
  EXPECT_EQ(mask_of(c, {1, 1, 5}, {0, 1, 2}, 6), (std::vector<float>{0, 0, H, H, H, H,  //
                                                                     H, H, H, 0, 0, H,  //
                                                                     0, H, H, H, H, H}));
}

TEST(KvCache, BadUseIsAnError) {
  EXPECT_THROW(KvCache(0), Error);
  KvCache c(4);
  store(c, {1}, {0}, {0});
  EXPECT_THROW(store(c, {1}, {1}, {0}), Error);   // cell in use
  EXPECT_THROW(store(c, {4}, {1}, {0}), Error);   // outside the cache
  EXPECT_THROW(store(c, {2}, {-1}, {0}), Error);  // negative position
  EXPECT_THROW(store(c, {2, 3}, {1}, {0}), Error);
  std::vector<float> m(8);
  EXPECT_THROW(c.fill_mask(std::vector<Pos>{0}, std::vector<SeqId>{0}, 5, 0, m.data()), Error);
  EXPECT_THROW(c.k(0), Error);  // a cells-only cache has no tensors
  EXPECT_THROW(c.seq_copy(-1, 2, -1, -1), Error);
}

TEST(KvCache, TensorsFollowTheModel) {
  auto model = Model::load(std::string(TESSERA_SHARED_DIR) + "/models/stories260K.gguf");
  const Hparams& h = model->hparams();
  KvCache c(*model, 16, DType::F32);
  for (int64_t il = 0; il < h.n_layer; ++il) {
    EXPECT_EQ(c.k(il)->ne, (std::array<int64_t, 4>{h.n_embd_kv(), 16, 1, 1}));
    EXPECT_EQ(c.v(il)->ne, (std::array<int64_t, 4>{16, h.n_embd_kv(), 1, 1}));
    EXPECT_EQ(c.k(il)->type, DType::F32);
    ASSERT_NE(c.k(il)->data, nullptr);
    EXPECT_EQ(static_cast<const float*>(c.v(il)->data)[0], 0.0f);  // zero-filled
  }
  EXPECT_THROW(c.k(h.n_layer), Error);
  EXPECT_THROW(KvCache(*model, 16, DType::Q8_0), Error);
}

// The numbers save_cells gives rebuild the same cells elsewhere: the same masks, positions, free
// slots and pending shift (a pipeline's later stages mirror the first stage's cache so).
TEST(KvCache, CellsSavedAndLoadedAreTheSameCells) {
  KvCache a(10);
  a.set_seq_ranges(2);
  store(a, {0, 1, 2, 5, 6}, {0, 1, 2, 0, 1}, {0, 0, 0, 1, 1});
  a.seq_copy(0, 3, 0, 2);    // cells 0 and 1 shared with sequence 3
  a.seq_shift(1, 0, -1, 4);  // sequence 1 at positions 4 and 5, K awaits re-roping
  KvCache b(10);
  b.load_cells(a.save_cells());
  EXPECT_EQ(b.used(), a.used());
  EXPECT_EQ(b.used_end(), a.used_end());
  EXPECT_EQ(b.seq_ranges(), 2);
  EXPECT_TRUE(b.needs_k_shift());
  for (int64_t i = 0; i < 10; ++i) {
    EXPECT_EQ(b.cell(i).pos, a.cell(i).pos) << i;
    EXPECT_EQ(b.cell(i).shift, a.cell(i).shift) << i;
    EXPECT_EQ(b.cell(i).seqs, a.cell(i).seqs) << i;
  }
  EXPECT_EQ(b.cell(5).pos, 4);
  EXPECT_EQ(b.cell(5).shift, 4);
  EXPECT_EQ(b.cell(0).seqs, (std::vector<SeqId>{0, 3}));
  EXPECT_EQ(b.seq_pos_max(1), 5);
  const std::vector<SeqId> step{0, 1, 3};
  EXPECT_EQ(b.find_slots(step), a.find_slots(step));
  EXPECT_EQ(mask_of(b, {3, 6, 2}, {0, 1, 3}, 10), mask_of(a, {3, 6, 2}, {0, 1, 3}, 10));
  // Loading replaces what was there.
  KvCache c(10);
  store(c, {9}, {7}, {4});
  c.load_cells(KvCache(10).save_cells());
  EXPECT_EQ(c.used(), 0);
  EXPECT_EQ(c.seq_pos_max(4), -1);
}

TEST(KvCache, LoadingCellsOfAnotherShapeIsAnError) {
  KvCache a(4);
  store(a, {0, 1}, {0, 1}, {0, 2});
  const std::vector<int32_t> good = a.save_cells();
  KvCache b(5);
  EXPECT_THROW(b.load_cells(good), Error);  // another size
  KvCache c(4);
  std::vector<int32_t> bad = good;
  bad.pop_back();
  EXPECT_THROW(c.load_cells(bad), Error);  // cut short
  bad = good;
  bad.push_back(0);
  EXPECT_THROW(c.load_cells(bad), Error);  // too long
  bad = good;
  bad[5] = -3;  // cell 0's sequence count
  EXPECT_THROW(c.load_cells(bad), Error);
  bad = good;
  bad[2] = 7;  // the shift flag
  EXPECT_THROW(c.load_cells(bad), Error);
  EXPECT_EQ(c.used(), 0);  // a failed load changes nothing
  c.load_cells(good);
  EXPECT_EQ(c.seq_pos_max(2), 1);
}
