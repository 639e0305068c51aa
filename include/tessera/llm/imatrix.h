#pragma once
// Computing an importance matrix as llama.cpp's llama-imatrix does: the text is tokenized whole (BOS
// when the vocabulary adds one) and cut into chunks of n_ctx tokens, each evaluated from an empty
// KV cache with its first token replaced by BOS when the vocabulary adds BOS; for every matrix
// multiplication by a weight of the blocks (blk.*; output.weight too with process_output) whose
// input has at least 16 rows, and for every MUL_MAT_ID, each input row x adds x_j to the weight's
// sum of column j, x_j^2 to its sum of squares and one to its count (per expert for MUL_MAT_ID:
// the rows routed to that expert, expert by expert, slot by slot, token by token). As llama-imatrix,
// it also scores each chunk's second half as llama-perplexity does (a running perplexity).
//
// The files are llama-imatrix's. GGUF: per weight NAME.in_sum2 [ne0, n_mat], NAME.counts
// [1, n_mat] and NAME.in_sum [ne0, n_mat] (f32), general.type "imatrix", imatrix.datasets,
// imatrix.chunk_count and imatrix.chunk_size. The legacy .dat: int32 entry count, then per entry
// (names sorted) int32 name length and bytes, int32 ncall, int32 value count and f32 values
// in_sum2 / count * ncall, where ncall is the largest count / chunk_size rounded up (a matrix that
// saw no input stores ncall, an entry none of whose matrices did is left out); then int32
// chunk_count and the dataset's name (int32 length and bytes). read_imatrix (quantize.h) reads
// either for the quantizer; read_imatrix_sums reads either back as sums, to combine.
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "tessera/llm/perplexity.h"
#include "tessera/llm/vocab.h"

namespace tessera::llm {

class Session;

struct ImatrixOptions {
  int64_t n_ctx = 512;          // tokens per chunk (llama-imatrix's -c), at least 2
  int64_t n_batch = 2048;       // tokens per decode within a chunk (at most n_ctx are used)
  int64_t first_chunk = 0;      // skip the text's first chunks (llama-imatrix --chunk)
  int64_t max_chunks = -1;      // < 0: every whole chunk from first_chunk on
  bool process_output = false;  // collect output.weight too (llama-imatrix --process-output)
  bool compute_ppl = true;      // score each chunk as llama-perplexity (llama-imatrix's default)
  std::string dataset;          // the text's name, added to the result's datasets
};

// One weight's statistics, per column of each of its n_mat matrices.
struct ImatrixStats {
  int64_t ne0 = 0;
  std::vector<float> in_sum2;   // sums of squared inputs, ne0 * n_mat
  std::vector<float> in_sum;    // sums of inputs, ne0 * n_mat; empty when combined with a file
                                // that had none (a legacy .dat, an older GGUF)
  std::vector<int64_t> counts;  // input rows per matrix, n_mat
};

struct ImatrixResult {
  std::map<std::string, ImatrixStats> stats;  // by weight name
  int64_t chunk_size = 0;                     // tokens per chunk, written as imatrix.chunk_size
  std::vector<std::string> datasets;          // the texts, in the order they were added
  int64_t n_chunks = 0;                       // chunks this result evaluated (not those read)
  NllSums nll;                                // the running perplexity (when compute_ppl)

  // llama-imatrix's imatrix.chunk_count: the largest count of any matrix / chunk_size.
  int64_t chunk_count() const;
};

// The progress after each chunk (compute_imatrix's callback).
struct ImatrixChunk {
  int64_t chunk = 0;  // 1-based
  int64_t n_chunks = 0;
  double ppl = 0.0;  // over every token scored so far (NaN without compute_ppl)
  double seconds = 0.0;
};

// Evaluates `tokens` (perplexity_tokens of the text) chunk by chunk in `session` (its cache must
// hold n_ctx tokens), adding the statistics to `result` (empty, or read from earlier files by
// read_imatrix_sums: llama-imatrix --in-file), whose chunk_size becomes n_ctx; on_chunk is called
// after each chunk, when `result` holds it. Error(InvalidArgument) for a text shorter than one
// chunk, a cache too small, or a weight whose inputs do not match the sums already in `result`.
void compute_imatrix(ImatrixResult& result, Session& session, const Vocab& vocab,
                     std::span<const Token> tokens, const ImatrixOptions& options,
                     const std::function<void(const ImatrixChunk&)>& on_chunk = {});
// The same from nothing.
ImatrixResult compute_imatrix(Session& session, const Vocab& vocab, std::span<const Token> tokens,
                              const ImatrixOptions& options,
                              const std::function<void(const ImatrixChunk&)>& on_chunk = {});

// Adds the importance matrix file at `path` (GGUF or legacy .dat) to `into`, as llama-imatrix
// --in-file does: sums and counts added per weight and matrix, the file's datasets appended. A
// legacy file stores means, so its sums are restored with `chunk_size` tokens per call (llama-imatrix
// takes its -c). Error(Io) when the file cannot be read; Error(CorruptFile) when it is not an
// importance matrix or is damaged; Error(InvalidArgument) naming the weight when its sizes differ
// from those already in `into` (a file for another model).
void read_imatrix_sums(ImatrixResult& into, const std::string& path, int64_t chunk_size);

// llama-imatrix --show-statistics. Per weight, over the columns of its matrices that saw input, the
// values v: the mean input (in_sum / count) where the result has sums, else the mean squared input
// (in_sum2 / count, "legacy"): their sum, extremes, mean and sample standard deviation; the entropy
// (bits) of the mean squares as a distribution; the fraction of values more than one standard
// deviation from the mean; and against the same weight of the layer before (blk.N-1), the cosine
// similarity and L2 distance of the per-matrix means (zeros for a matrix that saw nothing). Per
// layer: the sums and such fractions over its weights, and the similarity and distance of all its
// weights' means against the layer before's, taken as one vector.
struct ImatrixTensorStatistics {
  std::string name;    // the weight's full name
  std::string layer;   // "N" from blk.N., "-" for none
  std::string tensor;  // the name part before ".weight" (attn_q, ffn_down_exps, ...)
  double sum = 0.0, min = 0.0, max = 0.0, mean = 0.0, std_dev = 0.0;
  int64_t elements = 0;
  double entropy = 0.0;      // bits
  double zd_fraction = 0.0;  // |v - mean| > std_dev
  double cos_sim = 0.0;      // against blk.N-1's weight (0 without one)
  double l2_distance = 0.0;
};
struct ImatrixLayerStatistics {
  int64_t layer = 0;
  double sum = 0.0;          // of its weights' sums
  double zd_fraction = 0.0;  // over all its weights' values
  double cos_sim = 0.0, l2_distance = 0.0;
};
struct ImatrixStatistics {
  bool legacy = false;  // no weight has sums: the values are mean squares
  // Sorted as llama-imatrix prints them: by `tensor`, then by sum (legacy) or cos_sim, largest first.
  std::vector<ImatrixTensorStatistics> tensors;
  std::vector<ImatrixLayerStatistics> layers;  // blk layers in order
};
// Error(InvalidArgument) when no weight has a matrix that saw input.
ImatrixStatistics imatrix_statistics(const ImatrixResult& result);

enum class ImatrixFormat { Gguf, LegacyDat };

// Writes the result in llama-imatrix's format (atomically: path.tmp, then renamed). Error(Io) when
// it cannot be written.
void write_imatrix(const ImatrixResult& result, const std::string& path,
                   ImatrixFormat format = ImatrixFormat::Gguf);

}  // namespace tessera::llm
