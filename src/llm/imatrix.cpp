// llama-imatrix's importance matrix: squared inputs (and inputs) of every weight's matrix
// multiplications, summed per column over a text's chunks; its files read, combined and written.
#include "tessera/llm/imatrix.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <string_view>

#include "core/check.h"
#include "core/file_io.h"
#include "llm/imatrix_file.h"
#include "tessera/gguf.h"
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

// The statistics of `name` for ne0 values per matrix and n_mat matrices: new ones, or those already
// there when they agree (a single count read from an older file is spread over the matrices, as
// llama-imatrix does). with_sums: the contribution to come has plain sums too; new statistics get
// them, existing ones keep theirs only then. Error(InvalidArgument) when the sizes disagree.
ImatrixStats& stats_for(ImatrixResult& r, const std::string& name, int64_t ne0, int64_t n_mat,
                        bool with_sums) {
  ImatrixStats& s = r.stats[name];
  const auto n = static_cast<size_t>(ne0 * n_mat);
  if (s.in_sum2.empty()) {
    s.ne0 = ne0;
    s.in_sum2.assign(n, 0.0f);
    if (with_sums) s.in_sum.assign(n, 0.0f);
    s.counts.assign(static_cast<size_t>(n_mat), 0);
    return s;
  }
  if (s.in_sum2.size() != n)
    raise(ErrorCode::InvalidArgument,
          "imatrix: {} has {} values, {} here ({} x {}): a matrix for another model?", name, s.in_sum2.size(),
          n, ne0, n_mat);
  if (s.counts.size() == 1 && n_mat > 1) s.counts.assign(static_cast<size_t>(n_mat), s.counts[0]);
  if (static_cast<int64_t>(s.counts.size()) != n_mat)
    raise(ErrorCode::InvalidArgument, "imatrix: {} has {} counts, {} matrices here", name, s.counts.size(),
          n_mat);
  s.ne0 = ne0;
  if (!with_sums) s.in_sum.clear();  // partial sums would be wrong: leave them out
  return s;
}

// Adds one product's input rows to its weight's statistics.
void collect(ImatrixResult& r, const Session::MatMulInput& in, bool process_output) {
  if (!collected(in, process_output)) return;
  const Tensor& w = *in.weight;
  const int64_t ne0 = in.ne[0];
  const int64_t n_mat = w.ne[2] * w.ne[3];
  // (a weight read from a file without sums keeps none)
  ImatrixStats& s = stats_for(r, w.name, ne0, n_mat, /*with_sums=*/true);
  const bool sums = !s.in_sum.empty();
  auto add_row = [&](const float* x, int64_t mat) {
    float* sum2 = s.in_sum2.data() + mat * ne0;
    for (int64_t j = 0; j < ne0; ++j) sum2[j] += x[j] * x[j];
    if (sums) {
      float* sum = s.in_sum.data() + mat * ne0;
      for (int64_t j = 0; j < ne0; ++j) sum[j] += x[j];
    }
    ++s.counts[static_cast<size_t>(mat)];
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

// An imatrix GGUF: NAME.in_sum2 / NAME.counts pairs, and NAME.in_sum where the writer kept them.
ImatrixFile read_gguf(const std::string& path) {
  const gguf::File f = gguf::File::open(path);
  for (const char* key : {"imatrix.datasets", "imatrix.chunk_count", "imatrix.chunk_size"})
    if (f.find(key) == nullptr)
      raise(ErrorCode::CorruptFile, "{}: no {} (not an importance matrix from llama-imatrix)", path, key);
  ImatrixFile file;
  file.datasets = f.get_string_array("imatrix.datasets");
  file.chunk_count = std::clamp<int64_t>(f.get_int("imatrix.chunk_count"), 0, 1 << 30);
  struct Parts {
    const gguf::TensorInfo *sum2 = nullptr, *counts = nullptr, *sum = nullptr;
  };
  std::map<std::string, Parts> parts;
  auto strip = [](const std::string& name, std::string_view suffix, std::string& base) {
    if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      return false;
    base = name.substr(0, name.size() - suffix.size());
    return true;
  };
  for (const gguf::TensorInfo& t : f.tensors()) {
    std::string base;
    if (strip(t.name, ".in_sum2", base))
      parts[base].sum2 = &t;
    else if (strip(t.name, ".counts", base))
      parts[base].counts = &t;
    else if (strip(t.name, ".in_sum", base))
      parts[base].sum = &t;
  }
  if (parts.empty()) raise(ErrorCode::CorruptFile, "{}: no .in_sum2 / .counts tensors", path);
  auto floats = [&](const gguf::TensorInfo& t) {
    std::vector<float> v(static_cast<size_t>(t.nbytes / 4));
    std::memcpy(v.data(), f.tensor_data(t), v.size() * 4);
    return v;
  };
  for (const auto& [name, p] : parts) {
    if (p.sum2 == nullptr || p.counts == nullptr)
      raise(ErrorCode::CorruptFile, "{}: tensor {} has {} but no {}", path, name,
            p.sum2     ? "in_sum2"
            : p.counts ? "counts"
                       : "in_sum",
            p.sum2 ? "counts" : "in_sum2");
    const gguf::TensorInfo &sum2 = *p.sum2, &counts = *p.counts;
    const int64_t ne0 = sum2.ne[0], n_mat = sum2.ne[1];
    if (ne0 < 1 || n_mat < 1 || sum2.type_id != 0 || counts.type_id != 0 || sum2.ne[2] != 1 ||
        sum2.ne[3] != 1 || counts.ne[0] != 1 || counts.ne[1] != n_mat || counts.ne[2] != 1 ||
        counts.ne[3] != 1)
      raise(ErrorCode::CorruptFile,
            "{}: {}: in_sum2 must be f32 [n, matrices] and counts f32 [1, matrices] (got {} [{}, {}] and {} "
            "[{}, {}])",
            path, name, sum2.type_name(), ne0, n_mat, counts.type_name(), counts.ne[0], counts.ne[1]);
    if (p.sum != nullptr && (p.sum->type_id != 0 || p.sum->ne != sum2.ne))
      raise(ErrorCode::CorruptFile, "{}: {}: in_sum must be f32 [{}, {}] as in_sum2 (got {} [{}, {}])", path,
            name, ne0, n_mat, p.sum->type_name(), p.sum->ne[0], p.sum->ne[1]);
    ImatrixFileEntry& e = file.entries.emplace_back();
    e.name = name;
    e.ne0 = ne0;
    e.in_sum2 = floats(sum2);
    e.counts = floats(counts);
    if (p.sum != nullptr) e.in_sum = floats(*p.sum);
  }
  return file;
}

// The legacy binary imatrix (.dat).
ImatrixFile read_legacy(const std::string& path, const std::vector<char>& bytes) {
  size_t at = 0;
  auto need = [&](size_t n, const char* what) {
    if (bytes.size() - at < n) raise(ErrorCode::CorruptFile, "{}: truncated at byte {} ({})", path, at, what);
  };
  auto i32 = [&](const char* what) {
    need(4, what);
    int32_t v;
    std::memcpy(&v, bytes.data() + at, 4);
    at += 4;
    return v;
  };
  ImatrixFile file;
  file.legacy = true;
  const int32_t n_entries = i32("entry count");
  if (n_entries < 1)
    raise(ErrorCode::CorruptFile, "{}: {} entries (not an importance matrix?)", path, n_entries);
  for (int32_t i = 0; i < n_entries; ++i) {
    const int32_t len = i32("name length");
    if (len < 1 || len > 4096) raise(ErrorCode::CorruptFile, "{}: entry {}: name of {} bytes", path, i, len);
    need(static_cast<size_t>(len), "name");
    ImatrixFileEntry e;
    e.name.assign(bytes.data() + at, static_cast<size_t>(len));
    at += static_cast<size_t>(len);
    const int32_t ncall = i32("call count");
    const int32_t nval = i32("value count");
    if (nval < 1) raise(ErrorCode::CorruptFile, "{}: entry {}: {} values", path, e.name, nval);
    need(static_cast<size_t>(nval) * 4, "values");
    e.ne0 = nval;
    e.in_sum2.resize(static_cast<size_t>(nval));
    std::memcpy(e.in_sum2.data(), bytes.data() + at, e.in_sum2.size() * 4);
    at += e.in_sum2.size() * 4;
    e.counts = {static_cast<float>(ncall)};
    file.entries.push_back(std::move(e));
  }
  std::sort(file.entries.begin(), file.entries.end(),
            [](const ImatrixFileEntry& a, const ImatrixFileEntry& b) { return a.name < b.name; });
  for (size_t i = 1; i < file.entries.size(); ++i)
    if (file.entries[i].name == file.entries[i - 1].name)
      raise(ErrorCode::CorruptFile, "{}: tensor {} appears twice", path, file.entries[i].name);
  if (at < bytes.size()) {
    file.chunk_count = std::max(0, i32("last chunk"));
    const int32_t len = i32("dataset name length");
    if (len < 0) raise(ErrorCode::CorruptFile, "{}: dataset name of {} bytes", path, len);
    need(static_cast<size_t>(len), "dataset name");
    file.datasets.emplace_back(bytes.data() + at, static_cast<size_t>(len));
  }
  return file;
}

void write_gguf(const ImatrixResult& r, const std::string& path) {
  gguf::Writer w;
  w.set("general.type", std::string("imatrix"));
  w.set("imatrix.datasets", gguf::ArrayValue::of(r.datasets));
  w.set("imatrix.chunk_count", static_cast<uint32_t>(std::clamp<int64_t>(r.chunk_count(), 0, UINT32_MAX)));
  w.set("imatrix.chunk_size", static_cast<uint32_t>(std::clamp<int64_t>(r.chunk_size, 0, UINT32_MAX)));
  for (const auto& [name, s] : r.stats) {
    const auto n_mat = static_cast<int64_t>(s.counts.size());
    const int64_t sum_ne[2] = {s.ne0, n_mat}, count_ne[2] = {1, n_mat};
    const std::vector<float> counts(s.counts.begin(), s.counts.end());
    w.add_tensor(name + ".in_sum2", DType::F32, sum_ne, s.in_sum2.data(), s.in_sum2.size() * 4);
    w.add_tensor(name + ".counts", DType::F32, count_ne, counts.data(), counts.size() * 4);
    if (!s.in_sum.empty())
      w.add_tensor(name + ".in_sum", DType::F32, sum_ne, s.in_sum.data(), s.in_sum.size() * 4);
  }
  w.write(path);
}

void write_legacy(const ImatrixResult& r, const std::string& path) {
  if (r.chunk_size < 1) raise(ErrorCode::InvalidArgument, "imatrix: a .dat file needs the chunk size");
  std::vector<const std::pair<const std::string, ImatrixStats>*> kept;
  for (const auto& entry : r.stats)
    if (std::any_of(entry.second.counts.begin(), entry.second.counts.end(), [](int64_t c) { return c > 0; }))
      kept.push_back(&entry);
  auto clamp32 = [](int64_t v) { return static_cast<int32_t>(std::clamp<int64_t>(v, 0, INT32_MAX)); };
  file_io::write_atomically(path, [&](file_io::ByteWriter write) {
    auto i32 = [&](int32_t v) { write(&v, 4); };
    i32(static_cast<int32_t>(kept.size()));
    std::vector<float> values;
    for (const auto* entry : kept) {
      const auto& [name, s] = *entry;
      i32(static_cast<int32_t>(name.size()));
      write(name.data(), name.size());
      const int64_t most = *std::max_element(s.counts.begin(), s.counts.end());
      const int32_t ncall = clamp32((most + r.chunk_size - 1) / r.chunk_size);
      i32(ncall);
      i32(clamp32(static_cast<int64_t>(s.in_sum2.size())));
      values.resize(s.in_sum2.size());
      const size_t per_count = s.in_sum2.size() / s.counts.size();
      for (size_t i = 0; i < values.size(); ++i) {
        const int64_t count = s.counts[i / per_count];
        // A matrix that saw nothing stores ncall (mean 1), as llama-imatrix.
        values[i] = count == 0 ? static_cast<float>(ncall)
                               : s.in_sum2[i] / static_cast<float>(count) * static_cast<float>(ncall);
      }
      write(values.data(), values.size() * 4);
    }
    i32(clamp32(r.chunk_count()));
    const std::string dataset = r.datasets.empty() ? std::string() : r.datasets.back();
    i32(static_cast<int32_t>(dataset.size()));
    write(dataset.data(), dataset.size());
  });
}

}  // namespace

ImatrixFile read_imatrix_file(const std::string& path) {
  const file_io::ReadableFile file = file_io::open_for_reading(path);  // Error(Io) naming why not
  char magic[4] = {};
  if (file_io::read_at_start(file, magic, 4, path) < 4)
    raise(ErrorCode::CorruptFile, "importance matrix {}: shorter than 4 bytes", path);
  if (std::memcmp(magic, "GGUF", 4) == 0) return read_gguf(path);
  if (file.size > (size_t{1} << 32))
    raise(ErrorCode::CorruptFile, "importance matrix {}: {} bytes is too large", path, file.size);
  std::vector<char> bytes(file.size);
  bytes.resize(file_io::read_at_start(file, bytes.data(), bytes.size(), path));
  return read_legacy(path, bytes);
}

int64_t ImatrixResult::chunk_count() const {
  int64_t most = 0;
  for (const auto& [name, s] : stats)
    for (int64_t c : s.counts) most = std::max(most, c);
  return chunk_size > 0 ? most / chunk_size : 0;
}

void read_imatrix_sums(ImatrixResult& into, const std::string& path, int64_t chunk_size) {
  if (chunk_size < 1)
    raise(ErrorCode::InvalidArgument, "imatrix: a chunk size of {} tokens (-c) is too small", chunk_size);
  const ImatrixFile file = read_imatrix_file(path);
  into.chunk_size = chunk_size;
  for (const ImatrixFileEntry& e : file.entries) {
    auto n_mat = static_cast<int64_t>(e.counts.size());
    int64_t ne0 = e.ne0;
    // A legacy entry has one count for all its matrices: it takes the matrices already there.
    const auto known = into.stats.find(e.name);
    if (file.legacy && known != into.stats.end() && known->second.counts.size() > 1 &&
        e.in_sum2.size() % known->second.counts.size() == 0) {
      n_mat = static_cast<int64_t>(known->second.counts.size());
      ne0 = static_cast<int64_t>(e.in_sum2.size()) / n_mat;
    }
    // (sums stay only where every part has them)
    ImatrixStats& s = stats_for(into, e.name, ne0, n_mat, !e.in_sum.empty());
    for (float v : e.in_sum2)
      if (!std::isfinite(v))
        raise(ErrorCode::CorruptFile, "{}: tensor {} has a non-finite sum", path, e.name);
    if (file.legacy) {
      // Means times ncall: sums again with chunk_size rows per call (as llama-imatrix reads them).
      const float rows = static_cast<float>(chunk_size);
      for (size_t i = 0; i < s.in_sum2.size(); ++i) s.in_sum2[i] += e.in_sum2[i] * rows;
      for (int64_t& c : s.counts) c += static_cast<int64_t>(std::max(0.0f, e.counts[0])) * chunk_size;
      continue;
    }
    for (size_t i = 0; i < s.in_sum2.size(); ++i) s.in_sum2[i] += e.in_sum2[i];
    for (size_t i = 0; i < s.in_sum.size(); ++i) s.in_sum[i] += e.in_sum[i];
    for (size_t j = 0; j < s.counts.size(); ++j) {
      const float c = e.counts[j];
      if (!(c >= 0.0f && c < 9.0e18f))
        raise(ErrorCode::CorruptFile, "{}: tensor {} has a count of {}", path, e.name, c);
      s.counts[j] += std::llround(c);
    }
  }
  into.datasets.insert(into.datasets.end(), file.datasets.begin(), file.datasets.end());
}

void compute_imatrix(ImatrixResult& result, Session& session, const Vocab& vocab,
                     std::span<const Token> tokens, const ImatrixOptions& options,
                     const std::function<void(const ImatrixChunk&)>& on_chunk) {
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

  ImatrixResult& r = result;
  r.chunk_size = n_ctx;
  if (!options.dataset.empty()) r.datasets.push_back(options.dataset);
  session.set_mat_mul_observer(
      [&r, &options](const Session::MatMulInput& in) { collect(r, in, options.process_output); });
  struct Unset {
    Session& s;
    ~Unset() { s.set_mat_mul_observer({}); }
  } unset{session};
  const bool add_bos = vocab.special().add_bos && vocab.bos() >= 0;
  const int64_t n_batch = std::min(options.n_batch, n_ctx);
  // As llama-imatrix, every position's logits are asked for (the output projection sees every row);
  // those of positions n_ctx/2 ... n_ctx-2 score the chunk's second half.
  const int64_t scored_from = n_ctx / 2, scored_to = n_ctx - 1;
  std::vector<Token> chunk;
  std::vector<float> scored;
  for (int64_t c = 0; c < n_chunks; ++c) {
    const auto t0 = std::chrono::steady_clock::now();
    session.reset();
    const int64_t first = (options.first_chunk + c) * n_ctx;
    const std::span<const Token> text =
        tokens.subspan(static_cast<size_t>(first), static_cast<size_t>(n_ctx));
    chunk.assign(text.begin(), text.end());
    if (add_bos) chunk[0] = vocab.bos();
    scored.clear();
    for (int64_t at = 0; at < n_ctx; at += n_batch) {
      const int64_t n = std::min(n_batch, n_ctx - at);
      const std::vector<float>& logits = session.decode(
          std::span<const Token>(chunk.data() + at, static_cast<size_t>(n)), /*all_logits=*/true);
      if (!options.compute_ppl) continue;
      const auto per_row = logits.size() / static_cast<size_t>(n);
      const int64_t from = std::max(at, scored_from), to = std::min(at + n, scored_to);
      if (from < to)
        scored.insert(scored.end(), logits.begin() + static_cast<ptrdiff_t>((from - at) * per_row),
                      logits.begin() + static_cast<ptrdiff_t>((to - at) * per_row));
    }
    // (scored against the text's own tokens, as llama-imatrix: the BOS in place of the first is not
    // among them)
    if (options.compute_ppl) r.nll.add_chunk(scored, text);
    ++r.n_chunks;
    if (on_chunk)
      on_chunk({c + 1, n_chunks, options.compute_ppl ? r.nll.ppl() : std::numeric_limits<double>::quiet_NaN(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()});
  }
}

ImatrixResult compute_imatrix(Session& session, const Vocab& vocab, std::span<const Token> tokens,
                              const ImatrixOptions& options,
                              const std::function<void(const ImatrixChunk&)>& on_chunk) {
  ImatrixResult r;
  compute_imatrix(r, session, vocab, tokens, options, on_chunk);
  return r;
}

namespace {

// A weight's per-matrix means as --show-statistics compares them: of the inputs where there are
// sums, else of their squares; zeros for a matrix that saw nothing.
std::vector<double> matrix_means(const ImatrixStats& s) {
  const std::vector<float>& v = s.in_sum.empty() ? s.in_sum2 : s.in_sum;
  std::vector<double> means(v.size(), 0.0);
  const size_t row = v.size() / s.counts.size();
  for (size_t i = 0; i < v.size(); ++i) {
    const int64_t c = s.counts[i / row];
    if (c > 0) means[i] = static_cast<double>(v[i]) / static_cast<double>(c);
  }
  return means;
}

// blk.N. in a weight's name: N, or -1.
int64_t block_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos || dot == 4) return -1;
  int64_t n = 0;
  for (size_t i = 4; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9' || n > (int64_t{1} << 40)) return -1;
    n = n * 10 + (name[i] - '0');
  }
  return n;
}

// The same weight of the layer before (blk.N-1.), or "" for none.
std::string previous_layer(const std::string& name) {
  const int64_t n = block_of(name);
  if (n <= 0) return {};
  return "blk." + std::to_string(n - 1) + name.substr(name.find('.', 4));
}

struct Similarity {
  double cos_sim = 0.0, l2_distance = 0.0;
};
Similarity compare(const std::vector<double>& a, const std::vector<double>& b) {
  double dot = 0.0, na = 0.0, nb = 0.0, d2 = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
    d2 += (a[i] - b[i]) * (a[i] - b[i]);
  }
  Similarity s;
  if (na > 0.0 && nb > 0.0)
    s.cos_sim = std::clamp(dot / (std::sqrt(na) * std::sqrt(nb)), -1.0, 1.0);
  else if (na == 0.0 && nb == 0.0)
    s.cos_sim = 1.0;
  s.l2_distance = std::sqrt(d2);
  return s;
}

}  // namespace

ImatrixStatistics imatrix_statistics(const ImatrixResult& result) {
  ImatrixStatistics out;
  out.legacy = true;
  struct LayerSums {
    double sum = 0.0, zd = 0.0;
    int64_t n = 0;
    std::vector<double> current, previous;
  };
  std::map<int64_t, LayerSums> layers;
  for (const auto& [name, s] : result.stats) {
    if (s.counts.empty() || s.in_sum2.empty()) continue;
    const bool legacy = s.in_sum.empty();
    out.legacy = out.legacy && legacy;
    const size_t row = s.in_sum2.size() / s.counts.size();
    // The values, and the mean squares the entropy takes, of the matrices that saw input.
    const std::vector<double> means = matrix_means(s);
    std::vector<double> values, squares;
    for (size_t i = 0; i < means.size(); ++i) {
      const int64_t c = s.counts[i / row];
      if (c <= 0) continue;
      values.push_back(means[i]);
      squares.push_back(static_cast<double>(s.in_sum2[i]) / static_cast<double>(c));
    }
    if (values.empty()) continue;
    ImatrixTensorStatistics t;
    t.name = name;
    const int64_t block = block_of(name);
    t.layer = block >= 0 ? std::to_string(block) : "-";
    const size_t weight = name.rfind(".weight");
    const size_t start = weight == std::string::npos ? std::string::npos : name.rfind('.', weight - 1);
    t.tensor = weight == std::string::npos || start == std::string::npos || start >= weight
                   ? name
                   : name.substr(start + 1, weight - start - 1);
    t.elements = static_cast<int64_t>(values.size());
    t.min = *std::min_element(values.begin(), values.end());
    t.max = *std::max_element(values.begin(), values.end());
    double m2 = 0.0;
    for (size_t i = 0; i < values.size(); ++i) {  // Welford's running mean and squared deviations
      t.sum += values[i];
      const double delta = values[i] - t.mean;
      t.mean += delta / static_cast<double>(i + 1);
      m2 += delta * (values[i] - t.mean);
    }
    t.std_dev =
        values.size() > 1 ? std::sqrt(std::max(0.0, m2 / static_cast<double>(values.size() - 1))) : 0.0;
    double energy = 0.0;
    for (double q : squares) energy += std::max(0.0, q);
    if (energy > 0.0)
      for (double q : squares) {
        const double p = std::max(0.0, q) / energy;
        if (p > 0.0) t.entropy -= p * std::log2(p);
      }
    if (t.std_dev > 0.0) {
      int64_t far = 0;
      for (double v : values) far += std::abs((v - t.mean) / t.std_dev) > 1.0 ? 1 : 0;
      t.zd_fraction = static_cast<double>(far) / static_cast<double>(values.size());
    }
    const std::string before = previous_layer(name);
    const auto prev = before.empty() ? result.stats.end() : result.stats.find(before);
    if (prev != result.stats.end() && !prev->second.counts.empty()) {
      const std::vector<double> then = matrix_means(prev->second);
      if (means.size() == then.size()) {
        const Similarity sim = compare(means, then);
        t.cos_sim = sim.cos_sim;
        t.l2_distance = sim.l2_distance;
        LayerSums& l = layers[block];
        l.current.insert(l.current.end(), means.begin(), means.end());
        l.previous.insert(l.previous.end(), then.begin(), then.end());
      }
    }
    if (block >= 0) {
      LayerSums& l = layers[block];
      l.sum += t.sum;
      l.zd += t.zd_fraction * static_cast<double>(t.elements);
      l.n += t.elements;
    }
    out.tensors.push_back(std::move(t));
  }
  if (out.tensors.empty())
    raise(ErrorCode::InvalidArgument, "imatrix: no weight has a matrix that saw input: no statistics");
  const bool legacy = out.legacy;
  std::stable_sort(out.tensors.begin(), out.tensors.end(),
                   [legacy](const ImatrixTensorStatistics& a, const ImatrixTensorStatistics& b) {
                     if (a.tensor != b.tensor) return a.tensor < b.tensor;
                     return legacy ? a.sum > b.sum : a.cos_sim > b.cos_sim;
                   });
  for (const auto& [block, l] : layers) {
    if (l.n == 0) continue;
    ImatrixLayerStatistics ls;
    ls.layer = block;
    ls.sum = l.sum;
    ls.zd_fraction = l.zd / static_cast<double>(l.n);
    if (!l.current.empty()) {
      const Similarity sim = compare(l.current, l.previous);
      ls.cos_sim = sim.cos_sim;
      ls.l2_distance = sim.l2_distance;
    }
    out.layers.push_back(ls);
  }
  return out;
}

void write_imatrix(const ImatrixResult& result, const std::string& path, ImatrixFormat format) {
  if (format == ImatrixFormat::LegacyDat)
    write_legacy(result, path);
  else
    write_gguf(result, path);
}

}  // namespace tessera::llm
