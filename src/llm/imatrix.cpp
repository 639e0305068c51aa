// llama-imatrix's importance matrix: squared inputs of every weight's matrix multiplications,
// summed per column over a text's chunks, written in its GGUF format.
#include "tessera/llm/imatrix.h"

#include <algorithm>

#include "core/check.h"
#include "tessera/gguf.h"
#include "tessera/llm/perplexity.h"
#include "tessera/llm/session.h"

namespace tessera::llm {
namespace {

// llama-imatrix ignores MUL_MATs over fewer rows than this (small batches skew the statistics).
constexpr int64_t kMinRows = 16;

// llama-imatrix's choice: every MUL_MAT_ID; a MUL_MAT by a weight of the blocks (or output.weight
// with process_output) whose b has at least 16 rows in its dim 1.
bool collected(const Session::MatMulInput& in, bool process_output) {
  if (in.ids != nullptr) return true;
  const std::string& name = in.weight->name;
  return in.ne[1] >= kMinRows && (name.rfind("blk.", 0) == 0 || (process_output && name == "output.weight"));
}

// Adds one product's input rows to its weight's statistics.
void collect(ImatrixResult& r, const Session::MatMulInput& in, bool process_output) {
  if (!collected(in, process_output)) return;
  const Tensor& w = *in.weight;
  const int64_t ne0 = in.ne[0];
  const int64_t n_mat = w.ne[2] * w.ne[3];
  ImatrixStats& s = r.stats[w.name];
  if (s.sums.empty()) {
    s.ne0 = ne0;
    s.sums.assign(static_cast<size_t>(ne0 * n_mat), 0.0f);
    s.counts.assign(static_cast<size_t>(n_mat), 0.0f);
  }
  // (a weight's products all read rows of its ne0)
  TESSERA_ASSERT(s.ne0 == ne0 && static_cast<int64_t>(s.counts.size()) == n_mat);
  auto add_row = [&](const float* x, int64_t mat) {
    float* sum = s.sums.data() + mat * ne0;
    for (int64_t j = 0; j < ne0; ++j) sum[j] += x[j] * x[j];
    s.counts[static_cast<size_t>(mat)] += 1.0f;
  };
  if (in.ids == nullptr) {  // MUL_MAT: b [ne0, rows, B2, B3]; llama-imatrix's matrix of (i2, i3) is (i2 %
                            // ne2, i3 % ne3)
    for (int64_t i3 = 0; i3 < in.ne[3]; ++i3)
      for (int64_t i2 = 0; i2 < in.ne[2]; ++i2) {
        const int64_t mat = (i3 % w.ne[3]) * w.ne[2] + i2 % w.ne[2];
        for (int64_t row = 0; row < in.ne[1]; ++row)
          add_row(in.x + ((i3 * in.ne[2] + i2) * in.ne[1] + row) * ne0, mat);
      }
    return;
  }
  // MUL_MAT_ID: b [ne0, B1, T], ids [n_used, T]; slot e of token t reads b[:, e % B1, t] into
  // expert ids[e, t]. llama-imatrix goes expert by expert, then slot, then token.
  const int64_t n_used = in.ids_ne[0], n_tok = in.ids_ne[1], b1 = in.ne[1];
  for (int64_t ex = 0; ex < n_mat; ++ex)
    for (int64_t e = 0; e < n_used; ++e)
      for (int64_t t = 0; t < n_tok; ++t) {
        const int32_t id = in.ids[t * n_used + e];
        TESSERA_ASSERT(id >= 0 && id < n_mat);  // MUL_MAT_ID checked them
        if (id == ex) add_row(in.x + (t * b1 + e % b1) * ne0, ex);
      }
}

}  // namespace

ImatrixResult compute_imatrix(Session& session, const Vocab& vocab, std::span<const Token> tokens,
                              const ImatrixOptions& options,
                              const std::function<void(int64_t chunk, int64_t n_chunks)>& on_chunk) {
  const int64_t n_ctx = options.n_ctx;
  if (n_ctx < 2) raise(ErrorCode::InvalidArgument, "imatrix: a chunk of {} tokens (-c) is too small", n_ctx);
  if (options.n_batch < 1)
    raise(ErrorCode::InvalidArgument, "imatrix: n_batch {} (-b) must be positive", options.n_batch);
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  if (n_tokens < n_ctx)
    raise(ErrorCode::InvalidArgument,
          "imatrix: the text has {} tokens, fewer than one chunk of {} (-c); give a longer text or a smaller "
          "chunk",
          n_tokens, n_ctx);
  if (session.n_ctx() < n_ctx)
    raise(ErrorCode::InvalidArgument,
          "imatrix: the session's cache holds {} tokens, fewer than a chunk of {}", session.n_ctx(), n_ctx);
  if (options.first_chunk < 0 || options.first_chunk >= n_tokens / n_ctx)
    raise(ErrorCode::InvalidArgument,
          "imatrix: the text has {} chunks of {} tokens; chunk {} (--chunk) is past them", n_tokens / n_ctx,
          n_ctx, options.first_chunk);
  int64_t n_chunks = n_tokens / n_ctx - options.first_chunk;
  if (options.max_chunks > 0) n_chunks = std::min(n_chunks, options.max_chunks);

  ImatrixResult r;
  r.chunk_size = n_ctx;
  r.dataset = options.dataset;
  session.set_mat_mul_observer(
      [&r, &options](const Session::MatMulInput& in) { collect(r, in, options.process_output); });
  struct Unset {
    Session& s;
    ~Unset() { s.set_mat_mul_observer({}); }
  } unset{session};
  const bool add_bos = vocab.special().add_bos && vocab.bos() >= 0;
  const int64_t n_batch = std::min(options.n_batch, n_ctx);
  std::vector<Token> chunk;
  for (int64_t c = 0; c < n_chunks; ++c) {
    session.reset();
    const int64_t first = (options.first_chunk + c) * n_ctx;
    chunk.assign(tokens.begin() + first, tokens.begin() + first + n_ctx);
    if (add_bos) chunk[0] = vocab.bos();
    for (int64_t at = 0; at < n_ctx; at += n_batch) {
      const int64_t n = std::min(n_batch, n_ctx - at);
      session.decode(std::span<const Token>(chunk.data() + at, static_cast<size_t>(n)), /*all_logits=*/true);
    }
    ++r.n_chunks;
    if (on_chunk) on_chunk(c + 1, n_chunks);
  }
  return r;
}

void write_imatrix(const ImatrixResult& result, const std::string& path) {
  gguf::Writer w;
  w.set("general.type", std::string("imatrix"));
  w.set("imatrix.datasets", gguf::ArrayValue::of(std::vector<std::string>{result.dataset}));
  w.set("imatrix.chunk_count", static_cast<uint32_t>(result.n_chunks));
  w.set("imatrix.chunk_size", static_cast<uint32_t>(result.chunk_size));
  for (const auto& [name, s] : result.stats) {
    const auto n_mat = static_cast<int64_t>(s.counts.size());
    const int64_t sum_ne[2] = {s.ne0, n_mat}, count_ne[2] = {1, n_mat};
    w.add_tensor(name + ".in_sum2", DType::F32, sum_ne, s.sums.data(), s.sums.size() * 4);
    w.add_tensor(name + ".counts", DType::F32, count_ne, s.counts.data(), s.counts.size() * 4);
  }
  w.write(path);
}

}  // namespace tessera::llm
