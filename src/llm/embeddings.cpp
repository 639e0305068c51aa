// Pooling a sequence's hidden states into an embedding (tessera/llm/embeddings.h).
#include "tessera/llm/embeddings.h"

#include <cmath>

#include "core/check.h"

namespace tessera::llm {

const char* pooling_name(Pooling p) noexcept {
  switch (p) {
    case Pooling::None:
      return "none";
    case Pooling::Mean:
      return "mean";
    case Pooling::Cls:
      return "cls";
    case Pooling::Last:
      return "last";
  }
  return "?";
}

std::optional<Pooling> parse_pooling(std::string_view name) noexcept {
  for (Pooling p : {Pooling::None, Pooling::Mean, Pooling::Cls, Pooling::Last})
    if (name == pooling_name(p)) return p;
  return std::nullopt;
}

Pooling default_pooling(const Model& model) noexcept {
  const int32_t t = model.hparams().pooling_type;
  if (t >= 0 && t <= static_cast<int32_t>(Pooling::Last)) return static_cast<Pooling>(t);
  return Pooling::Mean;  // absent, or rank (a reranker's head, which we do not have)
}

void l2_normalize(std::span<float> v) noexcept {
  double sum = 0.0;
  for (const float x : v) sum += static_cast<double>(x) * x;
  const double scale = sum > 0.0 ? 1.0 / std::sqrt(sum) : 0.0;
  for (float& x : v) x = static_cast<float>(x * scale);
}

std::vector<float> embed(Session& session, std::span<const Token> tokens, Pooling pooling, bool normalize,
                         SeqId seq) {
  const Hparams& h = session.model().hparams();
  if (!session.options().embeddings)
    raise(ErrorCode::InvalidArgument,
          "embed needs a session in embeddings mode (SessionOptions::embeddings)");
  if (tokens.empty()) raise(ErrorCode::InvalidArgument, "embed: no tokens given");
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (h.encoder && n > session.options().n_batch)
    raise(ErrorCode::InvalidArgument,
          "{} tokens are more than the batch of {}: an encoder's attention needs the whole sequence in one "
          "batch",
          n, session.options().n_batch);
  if (n > session.n_ctx())
    raise(ErrorCode::ContextFull, "{} tokens do not fit in the context of {} tokens", n, session.n_ctx());
  Batch b;
  for (int64_t i = 0; i < n; ++i) {
    const bool wanted = pooling == Pooling::Mean || pooling == Pooling::None ||
                        (pooling == Pooling::Cls ? i == 0 : i + 1 == n);
    b.add(tokens[static_cast<size_t>(i)], static_cast<Pos>(i), seq, wanted);
  }
  KvCache& cache = session.cache();
  cache.seq_clear(seq);
  std::vector<float> rows;
  try {
    rows = session.decode(b);
  } catch (...) {
    cache.seq_clear(seq);
    throw;
  }
  cache.seq_clear(seq);
  const size_t row = static_cast<size_t>(h.n_embd);
  TESSERA_ASSERT(!rows.empty() && rows.size() % row == 0);
  if (pooling == Pooling::None) {
    if (normalize)
      for (size_t o = 0; o < rows.size(); o += row) l2_normalize(std::span<float>(rows).subspan(o, row));
    return rows;
  }
  const size_t n_out = rows.size() / row;
  std::vector<double> sum(row, 0.0);
  for (size_t o = 0; o < n_out; ++o)
    for (size_t j = 0; j < row; ++j) sum[j] += rows[o * row + j];
  std::vector<float> out(row);
  for (size_t j = 0; j < row; ++j) out[j] = static_cast<float>(sum[j] / static_cast<double>(n_out));
  if (normalize) l2_normalize(out);
  return out;
}

}  // namespace tessera::llm
