// Perplexity and KL divergence as llama-perplexity computes them (the method and the .kld format are
// described in tessera/llm/perplexity.h).
#include "tessera/llm/perplexity.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

#include "core/check.h"
#include "tessera/llm/batch.h"
#include "tessera/llm/session.h"

namespace tessera::llm {
namespace {

constexpr char kMagic[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};
// The smallest context that scores a token per chunk (n_ctx - n_ctx/2 - 1 >= 1). An odd n_ctx is
// accepted, as by llama.cpp (scoring starts at position n_ctx/2, rounded down).
constexpr int64_t kMinCtx = 3;

// uint16 words per scored position in a .kld file: two floats, the vocabulary, padded to even.
int64_t record_words(int64_t n_vocab) { return 2 * ((n_vocab + 1) / 2) + 4; }

// Tokens scored per chunk: positions n_ctx/2 ... n_ctx-2 predict the token after them.
int64_t scored_per_chunk(int64_t n_ctx) { return n_ctx - n_ctx / 2 - 1; }

void check_options(const PerplexityOptions& o, bool ctx_may_be_zero) {
  if (!(ctx_may_be_zero && o.n_ctx == 0) && o.n_ctx < kMinCtx)
    raise(ErrorCode::InvalidArgument, "perplexity: the context (-c) must be at least {} tokens, got {}",
          kMinCtx, o.n_ctx);
  if (o.n_batch < 1)
    raise(ErrorCode::InvalidArgument, "perplexity: the batch size must be at least 1, got {}", o.n_batch);
  if (o.max_chunks == 0) raise(ErrorCode::InvalidArgument, "perplexity: the number of chunks must not be 0");
}

// BOS for the first token of each chunk, or kNoToken when the vocabulary adds none.
Token chunk_bos(const Vocab& vocab) {
  return vocab.special().add_bos && vocab.bos() != kNoToken ? vocab.bos() : kNoToken;
}

// Evaluates one chunk from an empty cache in decodes of n_batch tokens, its first token replaced by
// `bos` (unless kNoToken); `out` gets the logits of positions n_ctx/2 ... n_ctx-1, in order.
void eval_chunk(Session& session, std::span<const Token> chunk, Token bos, int64_t n_batch,
                std::vector<float>& out) {
  const auto n_ctx = static_cast<int64_t>(chunk.size());
  const int64_t first = n_ctx / 2;
  session.reset();
  out.clear();
  Batch batch;
  for (int64_t start = 0; start < n_ctx; start += n_batch) {
    const int64_t end = std::min(n_ctx, start + n_batch);
    batch.clear();
    for (int64_t pos = start; pos < end; ++pos) {
      const Token t = pos == 0 && bos != kNoToken ? bos : chunk[static_cast<size_t>(pos)];
      batch.add(t, static_cast<Pos>(pos), 0, pos >= first);
    }
    const std::vector<float>& logits = session.decode(batch);
    out.insert(out.end(), logits.begin(), logits.end());
  }
}

// One position's record of a .kld file (record_words(n_vocab) words).
void quantize_log_probs(std::span<const float> logits, uint16_t* record) {
  float max_logit = logits[0], min_logit = logits[0];
  for (float l : logits) {
    max_logit = std::max(max_logit, l);
    min_logit = std::min(min_logit, l);
  }
  min_logit = std::max(min_logit, max_logit - 16);
  double sum_exp = 0.0;
  for (float l : logits) sum_exp += std::exp(l - max_logit);
  const auto log_sum_exp = static_cast<float>(std::log(sum_exp));
  const float min_log_prob = min_logit - max_logit - log_sum_exp;
  const float scale = (max_logit - min_logit) / 65535.f;
  std::memcpy(record, &scale, sizeof(float));
  std::memcpy(record + 2, &min_log_prob, sizeof(float));
  uint16_t* q = record + 4;
  if (scale == 0.0f) {
    std::fill(q, q + logits.size(), uint16_t{0});
    return;
  }
  const float inv_scale = 1 / scale;
  for (size_t i = 0; i < logits.size(); ++i) {
    const long v = logits[i] > min_logit ? std::lrint(inv_scale * (logits[i] - min_logit)) : 0;
    q[i] = static_cast<uint16_t>(std::clamp<long>(v, 0, 65535));
  }
}

// One scored position of the KL divergence: the evaluated model's logits against the base record;
// adds to `s` and returns the position's KL divergence and p - p_base.
std::pair<float, float> compare_position(std::span<const float> logits, const uint16_t* record, Token tok,
                                         KlDivergenceStats& s) {
  const auto n_vocab = logits.size();
  float max_logit = logits[0];
  size_t imax = 0;
  for (size_t i = 1; i < n_vocab; ++i)
    if (logits[i] > max_logit) {
      max_logit = logits[i];
      imax = i;
    }
  double sum_exp = 0.0;
  for (float l : logits) sum_exp += std::exp(l - max_logit);
  const auto log_sum_exp = static_cast<float>(std::log(sum_exp));
  float scale = 0.0f, min_log_prob = 0.0f;
  std::memcpy(&scale, record, sizeof(float));
  std::memcpy(&min_log_prob, record + 2, sizeof(float));
  const uint16_t* q = record + 4;
  const auto t = static_cast<size_t>(tok);

  const float nll = max_logit + log_sum_exp - logits[t];
  s.sum_nll += nll;
  s.sum_nll2 += static_cast<double>(nll) * nll;
  const float nll_base = -(scale * q[t] + min_log_prob);
  s.sum_nll_base += nll_base;
  s.sum_nll_base2 += static_cast<double>(nll_base) * nll_base;
  s.sum_nll_nll_base += static_cast<double>(nll) * nll_base;

  const float log_norm = max_logit + log_sum_exp;  // log-probability of token i: logits[i] - log_norm
  double kld = 0.0;
  size_t imax_base = 0;
  float max_log_base = 0.0f;
  for (size_t i = 0; i < n_vocab; ++i) {
    const float log_base = scale * q[i] + min_log_prob;
    if (i == 0 || log_base > max_log_base) {
      max_log_base = log_base;
      imax_base = i;
    }
    if (log_base > -16.f) kld += std::exp(log_base) * (log_base - logits[i] + log_norm);
  }
  s.sum_kld += kld;
  s.sum_kld2 += kld * kld;
  ++s.count;
  if (imax == imax_base) ++s.n_same_top;

  const float p_diff = std::exp(-nll) - std::exp(-nll_base);
  s.sum_p_diff += p_diff;
  const double p_diff2 = static_cast<double>(p_diff) * p_diff;
  s.sum_p_diff2 += p_diff2;
  s.sum_p_diff4 += p_diff2 * p_diff2;
  s.max_p_diff = std::max(s.max_p_diff, std::fabs(p_diff));
  return {static_cast<float>(kld), p_diff};
}

// A file written to `path + ".tmp"` and renamed to `path` by commit(); removed if never committed.
class TempFile {
 public:
  explicit TempFile(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp") {
    f_ = std::fopen(tmp_.c_str(), "wb");
    if (f_ == nullptr) raise(ErrorCode::Io, "cannot open {} for writing", tmp_);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (f_ != nullptr) std::fclose(f_);
    if (!committed_) std::remove(tmp_.c_str());
  }
  void write(const void* data, size_t bytes) {
    if (bytes > 0 && std::fwrite(data, 1, bytes, f_) != bytes) raise(ErrorCode::Io, "cannot write {}", tmp_);
  }
  void commit() {
    const bool closed = std::fclose(f_) == 0;
    f_ = nullptr;
    if (!closed || std::rename(tmp_.c_str(), path_.c_str()) != 0)
      raise(ErrorCode::Io, "cannot write {}", path_);
    committed_ = true;
  }

 private:
  std::string path_, tmp_;
  std::FILE* f_ = nullptr;
  bool committed_ = false;
};

// llama-perplexity's mean and standard error of a sum over `count` values.
Estimate mean_and_error(double sum, double sum2, int64_t count) {
  if (count < 1) return {};
  const double mean = sum / static_cast<double>(count);
  const double var = sum2 / static_cast<double>(count) - mean * mean;
  return {mean, var > 0 && count > 10 ? std::sqrt(var / static_cast<double>(count - 1)) : 0.0};
}

double covariance(double sum_a, double sum_b, double sum_ab, int64_t count) {
  if (count < 10) return 0.0;
  const auto n = static_cast<double>(count);
  return (sum_ab / n - (sum_a / n) * (sum_b / n)) / (n - 1);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Reads a .kld file's header, checks it and the file's size, and leaves `f` at the tokens.
KlDivergenceBaseInfo read_base_header(std::FILE* f, const std::string& path) {
  char magic[sizeof kMagic] = {};
  if (std::fread(magic, 1, sizeof magic, f) != sizeof magic || std::memcmp(magic, kMagic, sizeof kMagic) != 0)
    raise(ErrorCode::CorruptFile, "{} is not a KL divergence base file (no \"_logits_\" at its start)", path);
  std::array<int32_t, 3> header{};
  if (std::fread(header.data(), 1, sizeof header, f) != sizeof header)
    raise(ErrorCode::CorruptFile, "{}: the file ends inside its header", path);
  const KlDivergenceBaseInfo info{header[0], header[1], header[2]};
  if (info.n_ctx < kMinCtx || info.n_vocab < 1 || info.n_chunks < 1 || info.n_ctx > (int64_t{1} << 24) ||
      info.n_ctx * info.n_chunks > (int64_t{1} << 31))
    raise(ErrorCode::CorruptFile, "{}: its header is out of range (n_ctx {}, n_vocab {}, {} chunks)", path,
          info.n_ctx, info.n_vocab, info.n_chunks);
  // The whole size, so that a truncated or foreign file is an Error before any evaluation.
  const uint64_t expected =
      sizeof kMagic + sizeof header + static_cast<uint64_t>(info.n_ctx * info.n_chunks) * sizeof(Token) +
      static_cast<uint64_t>(info.n_chunks) *
          static_cast<uint64_t>(scored_per_chunk(info.n_ctx) * record_words(info.n_vocab)) * sizeof(uint16_t);
  if (std::fseek(f, 0, SEEK_END) != 0) raise(ErrorCode::Io, "cannot read {}", path);
  const long size = std::ftell(f);
  if (size < 0 || static_cast<uint64_t>(size) != expected)
    raise(ErrorCode::CorruptFile,
          "{} has {} bytes; its header (n_ctx {}, n_vocab {}, {} chunks) makes it {} bytes", path, size,
          info.n_ctx, info.n_vocab, info.n_chunks, expected);
  if (std::fseek(f, static_cast<long>(sizeof kMagic + sizeof header), SEEK_SET) != 0)
    raise(ErrorCode::Io, "cannot read {}", path);
  return info;
}

}  // namespace

double token_nll(std::span<const float> logits, Token tok) {
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  double sum_exp = 0.0;
  for (float l : logits) sum_exp += std::exp(l - max_logit);
  return -(static_cast<double>(logits[static_cast<size_t>(tok)] - max_logit) - std::log(sum_exp));
}

void NllSums::add_chunk(std::span<const float> logits, std::span<const Token> chunk) {
  const auto n_ctx = static_cast<int64_t>(chunk.size());
  const int64_t first = n_ctx / 2, n_scored = scored_per_chunk(n_ctx);
  if (n_scored <= 0) return;  // a chunk of 2 tokens scores none
  TESSERA_ASSERT(logits.size() % static_cast<size_t>(n_scored) == 0);
  const size_t n_vocab = logits.size() / static_cast<size_t>(n_scored);
  for (int64_t i = 0; i < n_scored; ++i)
    add(token_nll(logits.subspan(static_cast<size_t>(i) * n_vocab, n_vocab),
                  chunk[static_cast<size_t>(first + i + 1)]));
}

double NllSums::ppl() const {
  return count > 0 ? std::exp(nll / static_cast<double>(count)) : std::numeric_limits<double>::quiet_NaN();
}

PerplexityResult NllSums::result(int64_t n_chunks) const {
  PerplexityResult r;
  r.n_chunks = n_chunks;
  r.n_scored = count;
  if (count == 0) return r;
  r.mean_nll = nll / static_cast<double>(count);
  r.ppl = std::exp(r.mean_nll);
  const double var = nll2 / static_cast<double>(count) - r.mean_nll * r.mean_nll;
  r.ppl_error = var > 0 && count > 1 ? std::sqrt(var / static_cast<double>(count - 1)) * r.ppl : 0.0;
  return r;
}

Estimate KlDivergenceStats::ppl() const {
  const Estimate l = mean_and_error(sum_nll, sum_nll2, count);
  return {std::exp(l.value), std::exp(l.value) * l.error};
}

Estimate KlDivergenceStats::ppl_base() const {
  const Estimate l = mean_and_error(sum_nll_base, sum_nll_base2, count);
  return {std::exp(l.value), std::exp(l.value) * l.error};
}

Estimate KlDivergenceStats::ln_ppl_ratio() const {
  const Estimate q = mean_and_error(sum_nll, sum_nll2, count);
  const Estimate b = mean_and_error(sum_nll_base, sum_nll_base2, count);
  const double cov = covariance(sum_nll, sum_nll_base, sum_nll_nll_base, count);
  const double var = q.error * q.error + b.error * b.error - 2.0 * cov;
  return {q.value - b.value, std::sqrt(std::max(var, 0.0))};
}

Estimate KlDivergenceStats::ppl_ratio() const {
  const Estimate l = ln_ppl_ratio();
  return {std::exp(l.value), std::exp(l.value) * l.error};
}

Estimate KlDivergenceStats::ppl_diff() const {
  const Estimate q = ppl(), b = ppl_base();
  const double cov = q.value * b.value * covariance(sum_nll, sum_nll_base, sum_nll_nll_base, count);
  const double var = q.error * q.error + b.error * b.error - 2.0 * cov;
  return {q.value - b.value, std::sqrt(std::max(var, 0.0))};
}

double KlDivergenceStats::ln_ppl_correlation() const {
  const Estimate q = mean_and_error(sum_nll, sum_nll2, count);
  const Estimate b = mean_and_error(sum_nll_base, sum_nll_base2, count);
  const double denom = q.error * b.error;
  return denom > 0 ? covariance(sum_nll, sum_nll_base, sum_nll_nll_base, count) / denom : 0.0;
}

Estimate KlDivergenceStats::kld() const { return mean_and_error(sum_kld, sum_kld2, count); }

Estimate KlDivergenceStats::p_diff() const { return mean_and_error(sum_p_diff, sum_p_diff2, count); }

Estimate KlDivergenceStats::rms_p_diff() const {
  const Estimate mse = mean_and_error(sum_p_diff2, sum_p_diff4, count);
  const double rms = std::sqrt(mse.value);
  return {rms, rms > 0 ? 0.5 / rms * mse.error : 0.0};
}

Estimate KlDivergenceStats::same_top() const {
  if (count < 1) return {};
  const double p = static_cast<double>(n_same_top) / static_cast<double>(count);
  return {p, count > 1 ? std::sqrt(p * (1.0 - p) / static_cast<double>(count - 1)) : 0.0};
}

KlDivergenceBaseInfo read_kl_divergence_base_info(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) raise(ErrorCode::Io, "cannot open the KL divergence base file {}", path);
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(f, &std::fclose);
  return read_base_header(f, path);
}

float percentile(std::span<const float> sorted, float fraction) {
  if (sorted.empty()) raise(ErrorCode::InvalidArgument, "percentile: no values");
  if (fraction <= 0) return sorted.front();
  if (fraction >= 1) return sorted.back();
  float p = fraction * static_cast<float>(sorted.size() - 1);
  const auto ip = static_cast<size_t>(p);
  p -= static_cast<float>(ip);
  return (1 - p) * sorted[ip] + p * sorted[std::min(ip + 1, sorted.size() - 1)];
}

float median(std::span<const float> sorted) {
  if (sorted.empty()) raise(ErrorCode::InvalidArgument, "median: no values");
  const size_t n = sorted.size();
  return n % 2 == 0 ? 0.5f * (sorted[n / 2] + sorted[n / 2 - 1]) : sorted[n / 2];
}

std::vector<Token> perplexity_tokens(const Vocab& vocab, std::string_view text, bool parse_special) {
  std::vector<Token> ids = vocab.encode(text, /*add_special=*/true, parse_special);
  // llama-perplexity refuses vocabularies that add EOS; the text's end is not a token to predict.
  if (vocab.special().add_eos && !ids.empty() && ids.back() == vocab.eos()) ids.pop_back();
  return ids;
}

PerplexityResult perplexity(Session& session, const Vocab& vocab, std::span<const Token> tokens,
                            const PerplexityOptions& options,
                            const std::function<void(const PerplexityChunk&)>& on_chunk) {
  check_options(options, /*ctx_may_be_zero=*/false);
  const int64_t n_ctx = options.n_ctx;
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  if (n_tokens < n_ctx)
    raise(ErrorCode::InvalidArgument,
          "perplexity: the text has {} tokens, fewer than one chunk of {} (-c); give a longer text or a "
          "smaller context",
          n_tokens, n_ctx);
  if (session.n_ctx() < n_ctx)
    raise(ErrorCode::InvalidArgument,
          "perplexity: the session's cache holds {} tokens, fewer than a chunk of {}", session.n_ctx(),
          n_ctx);
  int64_t n_chunks = n_tokens / n_ctx;
  if (options.max_chunks > 0) n_chunks = std::min(n_chunks, options.max_chunks);
  const auto n_vocab = static_cast<int64_t>(vocab.size());
  const int64_t first = n_ctx / 2;
  const int64_t n_scored = scored_per_chunk(n_ctx);
  const Token bos = chunk_bos(vocab);
  const int64_t n_batch = std::min(options.n_batch, n_ctx);

  std::unique_ptr<TempFile> base;
  std::vector<uint16_t> records;
  const int64_t nv = record_words(n_vocab);
  if (!options.save_base.empty()) {
    base = std::make_unique<TempFile>(options.save_base);
    const std::array<int32_t, 3> header = {static_cast<int32_t>(n_ctx), static_cast<int32_t>(n_vocab),
                                           static_cast<int32_t>(n_chunks)};
    base->write(kMagic, sizeof kMagic);
    base->write(header.data(), sizeof header);
    base->write(tokens.data(), static_cast<size_t>(n_chunks * n_ctx) * sizeof(Token));
    records.assign(static_cast<size_t>(n_scored * nv), 0);
  }

  NllSums sums;
  std::vector<float> logits;
  for (int64_t c = 0; c < n_chunks; ++c) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::span<const Token> chunk =
        tokens.subspan(static_cast<size_t>(c * n_ctx), static_cast<size_t>(n_ctx));
    eval_chunk(session, chunk, bos, n_batch, logits);
    if (static_cast<int64_t>(logits.size()) != (n_ctx - first) * n_vocab)
      raise(ErrorCode::InvalidArgument,
            "perplexity: the model gives {} logits per token, the vocabulary has {} tokens",
            static_cast<int64_t>(logits.size()) / (n_ctx - first), n_vocab);
    // (the last position's row scores nothing)
    sums.add_chunk(std::span<const float>(logits).first(static_cast<size_t>(n_scored * n_vocab)), chunk);
    if (base) {
      for (int64_t i = 0; i < n_scored; ++i)
        quantize_log_probs(std::span<const float>(logits.data() + i * n_vocab, static_cast<size_t>(n_vocab)),
                           records.data() + i * nv);
      base->write(records.data(), records.size() * sizeof(uint16_t));
    }
    if (on_chunk) on_chunk({c + 1, n_chunks, sums.ppl(), seconds_since(t0)});
  }
  if (base) base->commit();
  return sums.result(n_chunks);
}

KlDivergenceResult kl_divergence(Session& session, const Vocab& vocab, const std::string& base_path,
                                 const PerplexityOptions& options,
                                 const std::function<void(const KlDivergenceChunk&)>& on_chunk) {
  check_options(options, /*ctx_may_be_zero=*/true);
  std::FILE* f = std::fopen(base_path.c_str(), "rb");
  if (f == nullptr) raise(ErrorCode::Io, "cannot open the KL divergence base file {}", base_path);
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(f, &std::fclose);
  const KlDivergenceBaseInfo info = read_base_header(f, base_path);
  const int64_t n_ctx = info.n_ctx, file_chunks = info.n_chunks;
  const auto n_vocab = static_cast<int64_t>(vocab.size());
  if (info.n_vocab != n_vocab)
    raise(
        ErrorCode::InvalidArgument,
        "{} was made with a vocabulary of {} tokens, this model has {}: the models do not share a vocabulary",
        base_path, info.n_vocab, n_vocab);
  if (options.n_ctx != 0 && options.n_ctx != n_ctx)
    raise(ErrorCode::InvalidArgument,
          "{} was made with a context of {} tokens (-c {}), this run asks for {}: the chunks would differ",
          base_path, n_ctx, n_ctx, options.n_ctx);
  if (session.n_ctx() < n_ctx)
    raise(ErrorCode::InvalidArgument,
          "kl_divergence: the session's cache holds {} tokens, fewer than a chunk of {}", session.n_ctx(),
          n_ctx);
  auto read = [&](void* dst, size_t bytes, const char* what) {
    if (std::fread(dst, 1, bytes, f) != bytes)
      raise(ErrorCode::CorruptFile, "{}: the file ends inside {}", base_path, what);
  };
  const int64_t nv = record_words(n_vocab);
  const int64_t n_scored = scored_per_chunk(n_ctx);
  std::vector<Token> tokens(static_cast<size_t>(n_ctx * file_chunks));
  read(tokens.data(), tokens.size() * sizeof(Token), "its tokens");
  for (Token t : tokens)
    if (t < 0 || t >= n_vocab)
      raise(ErrorCode::CorruptFile, "{}: token {} is outside the vocabulary of {}", base_path, t, n_vocab);

  int64_t n_chunks = file_chunks;
  if (options.max_chunks > 0) n_chunks = std::min(n_chunks, options.max_chunks);
  const int64_t first = n_ctx / 2;
  const Token bos = chunk_bos(vocab);
  const int64_t n_batch = std::min(options.n_batch, n_ctx);

  KlDivergenceResult r;
  r.n_ctx = n_ctx;
  r.n_chunks = n_chunks;
  r.kld.reserve(static_cast<size_t>(n_chunks * n_scored));
  r.p_diff.reserve(static_cast<size_t>(n_chunks * n_scored));
  std::vector<uint16_t> records(static_cast<size_t>(n_scored * nv));
  std::vector<float> logits;
  for (int64_t c = 0; c < n_chunks; ++c) {
    const auto t0 = std::chrono::steady_clock::now();
    read(records.data(), records.size() * sizeof(uint16_t), "a chunk's log-probabilities");
    const std::span<const Token> chunk(tokens.data() + c * n_ctx, static_cast<size_t>(n_ctx));
    eval_chunk(session, chunk, bos, n_batch, logits);
    if (static_cast<int64_t>(logits.size()) != (n_ctx - first) * n_vocab)
      raise(ErrorCode::InvalidArgument,
            "kl_divergence: the model gives {} logits per token, the vocabulary has {} tokens",
            static_cast<int64_t>(logits.size()) / (n_ctx - first), n_vocab);
    for (int64_t i = 0; i < n_scored; ++i) {
      const std::span<const float> row(logits.data() + i * n_vocab, static_cast<size_t>(n_vocab));
      const auto [kld, p_diff] =
          compare_position(row, records.data() + i * nv, chunk[static_cast<size_t>(first + i + 1)], r.stats);
      r.kld.push_back(kld);
      r.p_diff.push_back(p_diff);
    }
    if (on_chunk) on_chunk({c + 1, n_chunks, seconds_since(t0), r.stats});
  }
  std::sort(r.kld.begin(), r.kld.end());
  std::sort(r.p_diff.begin(), r.p_diff.end());
  return r;
}

}  // namespace tessera::llm
