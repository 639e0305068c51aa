#pragma once
// Computing an importance matrix as llama.cpp's llama-imatrix does: the text is tokenized whole (BOS
// when the vocabulary adds one) and cut into chunks of n_ctx tokens, each evaluated from an empty
// KV cache with its first token replaced by BOS when the vocabulary adds BOS; for every matrix
// multiplication by a weight of the blocks (blk.*; output.weight too with process_output) whose
// input has at least 16 rows, and for every MUL_MAT_ID, each input row x adds x_j^2 to the weight's
// sum of column j and one to its count (per expert for MUL_MAT_ID: the rows routed to that
// expert, expert by expert, slot by slot, token by token). The file is llama-imatrix's
// GGUF: NAME.in_sum2 [ne0, n_mat] and NAME.counts [1, n_mat] (f32), general.type "imatrix",
// imatrix.datasets, imatrix.chunk_count and imatrix.chunk_size; read_imatrix (quantize.h) reads
// it back as in_sum2 / counts.
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "tessera/llm/vocab.h"

namespace tessera::llm {

class Session;

struct ImatrixOptions {
  int64_t n_ctx = 512;          // tokens per chunk (llama-imatrix's -c), at least 2
  int64_t n_batch = 2048;       // tokens per decode within a chunk (at most n_ctx are used)
  int64_t first_chunk = 0;      // skip the text's first chunks (llama-imatrix --chunk)
  int64_t max_chunks = -1;      // < 0: every whole chunk from first_chunk on
  bool process_output = false;  // collect output.weight too (llama-imatrix --process-output)
  std::string dataset;          // the text's name, written as imatrix.datasets
};

// One weight's statistics: sums of squared inputs per column of each matrix, rows seen per matrix.
struct ImatrixStats {
  int64_t ne0 = 0;
  std::vector<float> sums;    // ne0 * n_mat
  std::vector<float> counts;  // n_mat
};

struct ImatrixResult {
  std::map<std::string, ImatrixStats> stats;  // by weight name
  int64_t n_chunks = 0;
  int64_t chunk_size = 0;
  std::string dataset;
};

// Evaluates `tokens` (perplexity_tokens of the text) chunk by chunk in `session` (its cache must
// hold n_ctx tokens), collecting the statistics; on_chunk is called after each chunk (1-based).
// Error(InvalidArgument) for a text shorter than one chunk or a cache too small.
ImatrixResult compute_imatrix(Session& session, const Vocab& vocab, std::span<const Token> tokens,
                              const ImatrixOptions& options,
                              const std::function<void(int64_t chunk, int64_t n_chunks)>& on_chunk = {});

// Writes the result as llama-imatrix's GGUF (atomically: path.tmp, then renamed).
void write_imatrix(const ImatrixResult& result, const std::string& path);

}  // namespace tessera::llm
