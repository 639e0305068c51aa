// Saved sessions (tessera/llm/session_file.h). The format, version 2, little-endian, no padding:
//
//   magic       8 bytes "TESSERAS"
//   version     u32 (kSessionFileVersion)
//   size        u64: the whole file's bytes, checksum included (a shorter file is truncated)
//   identity    the model's (below)
//   kv type     string: "f16" or "f32"
//   n_layer     u32
//   n_embd_k    u64: a K row (one token, every KV head), elements
//   n_embd_v    u64: a V row, elements
//   n_tokens    u64
//   tokens      n_tokens x i32, positions 0..n_tokens-1
//   per layer   K: n_tokens rows of n_embd_k elements, in position order;
//               V: n_embd_v channels of n_tokens elements (the cache's transposed layout restricted
//               to the sequence's cells, in position order)
//   checksum    u64: XXH64 (seed 0) of every byte before it
//
// A string is a u32 byte count and the bytes. The identity is the architecture (string), the
// hyperparameters (Model::hyperparameters() but arch: u32 count, then name and value as strings), the GGUF
// file's size and the XXH64 of its header, every byte before the tensor data (u64, u64; 0 and 0 for a
// synthetic model), and the weights (u32 count, then name, type and 4 x i64 shape each).
//
// Why the identity is enough: a token's K/V are a function of the weights, the hyperparameters and
// the architecture's graph. The GGUF header holds every metadata key (architecture,
// hyperparameters, vocabulary, ...) and every tensor's name, type, shape and offset, and the file
// size pins the data section, so another model, another quantization, another vocabulary or a
// rewritten file of another size is caught. The weight bytes themselves are not hashed (that would
// read the whole model at every save and load): the one change it misses is a file of the same size
// whose header is byte for byte the same but whose weight values differ, which real conversions
// (general.name, file type, quantization version, ...) make unlikely. The hyperparameters and the
// weight list are spelled out, beside the digest, so that an error can name what differs; a
// synthetic model (no file) has only them. Neither the device that computed the K/V nor the
// Tessera build is part of it: K/V made on a device or by another build are the same model's.
#include "tessera/llm/session_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <utility>

#include "core/check.h"
#include "core/file_io.h"
#include "core/hash.h"
#include "tessera/llm/model.h"

namespace tessera::llm {
namespace {

constexpr char kMagic[8] = {'T', 'E', 'S', 'S', 'E', 'R', 'A', 'S'};
constexpr size_t kHeaderBytes = sizeof kMagic + sizeof(uint32_t) + sizeof(uint64_t);
constexpr size_t kChecksumBytes = sizeof(uint64_t);

struct WeightId {
  std::string name, type;
  std::array<int64_t, 4> ne{};
  bool operator==(const WeightId&) const = default;
};

struct Identity {
  std::string arch;
  std::vector<std::pair<std::string, std::string>> hparams;
  uint64_t gguf_size = 0, gguf_header_digest = 0;
  std::vector<WeightId> weights;
};

std::string shape_text(const std::array<int64_t, 4>& ne) {
  return fmt::format("[{}, {}, {}, {}]", ne[0], ne[1], ne[2], ne[3]);
}

Identity identity_of(const Model& m) {
  Identity id;
  id.arch = m.hparams().arch;
  // Every hyperparameter (the architecture's own too) but arch, the ones that shape the cache first.
  for (auto& [name, value] : m.hyperparameters())
    if (name != "arch") id.hparams.emplace_back(std::move(name), std::move(value));
  for (const Tensor* t : m.weight_tensors())
    if (!(m.tied_output() && t == m.output()))
      id.weights.push_back({t->name, std::string(name(t->type)), t->ne});

  if (const gguf::File* f = m.file()) {
    id.gguf_size = f->file_size();
    Xxh64 hash;
    hash.update(f->bytes().data(), std::min(f->data_offset(), f->bytes().size()));
    id.gguf_header_digest = hash.digest();
  }
  return id;
}

// What differs between the file's identity and the model's, "" when nothing does.
std::string identity_difference(const Identity& file, const Identity& model) {
  if (file.arch != model.arch)
    return fmt::format("architecture {} (in the file) vs {} (this model)", file.arch, model.arch);
  for (size_t i = 0; i < std::max(file.hparams.size(), model.hparams.size()); ++i) {
    if (i >= file.hparams.size())
      return fmt::format("hyperparameter {} is not in the file", model.hparams[i].first);
    if (i >= model.hparams.size())
      return fmt::format("hyperparameter {} of the file is unknown here", file.hparams[i].first);
    const auto& [fk, fv] = file.hparams[i];
    const auto& [mk, mv] = model.hparams[i];
    if (fk != mk) return fmt::format("hyperparameter {} (in the file) vs {} (this model)", fk, mk);
    if (fv != mv) return fmt::format("hyperparameter {} {} (in the file) vs {} (this model)", fk, fv, mv);
  }
  for (size_t i = 0; i < std::max(file.weights.size(), model.weights.size()); ++i) {
    if (i >= file.weights.size()) return fmt::format("tensor {} is not in the file", model.weights[i].name);
    if (i >= model.weights.size()) return fmt::format("tensor {} is not in this model", file.weights[i].name);
    const WeightId& f = file.weights[i];
    const WeightId& m = model.weights[i];
    if (f.name != m.name) return fmt::format("tensor {} (in the file) vs {} (this model)", f.name, m.name);
    if (f != m)
      return fmt::format("tensor {} {} {} (in the file) vs {} {} (this model)", f.name, f.type,
                         shape_text(f.ne), m.type, shape_text(m.ne));
  }
  if (file.gguf_size != model.gguf_size)
    return fmt::format("GGUF file size {} (in the file) vs {} (this model)", file.gguf_size, model.gguf_size);
  if (file.gguf_header_digest != model.gguf_header_digest)
    return fmt::format("GGUF metadata digest {:016x} (in the file) vs {:016x} (this model)",
                       file.gguf_header_digest, model.gguf_header_digest);
  return "";
}

// Appends to a sink while hashing what passes.
class Out {
 public:
  using Sink = std::function<void(const void*, size_t)>;
  explicit Out(Sink sink) : sink_(std::move(sink)) {}
  void raw(const void* p, size_t n) {
    if (n == 0) return;
    hash_.update(p, n);
    sink_(p, n);
  }
  template <typename T>
  void num(T v) {
    raw(&v, sizeof v);
  }
  void str(std::string_view s) {
    num(static_cast<uint32_t>(s.size()));
    raw(s.data(), s.size());
  }
  void checksum() {
    const uint64_t d = hash_.digest();
    sink_(&d, sizeof d);
  }

 private:
  Sink sink_;
  Xxh64 hash_;
};

void write_identity(Out& out, const Identity& id) {
  out.str(id.arch);
  out.num(static_cast<uint32_t>(id.hparams.size()));
  for (const auto& [k, v] : id.hparams) {
    out.str(k);
    out.str(v);
  }
  out.num(id.gguf_size);
  out.num(id.gguf_header_digest);
  out.num(static_cast<uint32_t>(id.weights.size()));
  for (const WeightId& w : id.weights) {
    out.str(w.name);
    out.str(w.type);
    for (int64_t n : w.ne) out.num(n);
  }
}

size_t identity_bytes(const Identity& id) {
  size_t n = 0;
  Out counter([&](const void*, size_t k) { n += k; });
  write_identity(counter, id);
  return n;
}

// Reads fields, every read bounded by the bytes left.
class In {
 public:
  In(std::span<const std::byte> bytes, const std::string& source) : b_(bytes), source_(source) {}
  const std::byte* take(size_t n, std::string_view what) {
    if (n > b_.size() - pos_)
      raise(ErrorCode::CorruptFile, "{}: corrupted: {} at byte {} runs past the end of the state", source_,
            what, pos_);
    const std::byte* p = b_.data() + pos_;
    pos_ += n;
    return p;
  }
  template <typename T>
  T num(std::string_view what) {
    T v;
    std::memcpy(&v, take(sizeof v, what), sizeof v);
    return v;
  }
  std::string str(std::string_view what) {
    const auto n = num<uint32_t>(what);
    const std::byte* p = take(n, what);
    return std::string(reinterpret_cast<const char*>(p), n);
  }
  size_t left() const noexcept { return b_.size() - pos_; }

 private:
  std::span<const std::byte> b_;
  size_t pos_ = 0;
  const std::string& source_;
};

Identity read_identity(In& in) {
  Identity id;
  id.arch = in.str("the architecture");
  const auto n_hparams = in.num<uint32_t>("the hyperparameter count");
  for (uint32_t i = 0; i < n_hparams; ++i) {
    std::string k = in.str("a hyperparameter name");
    std::string v = in.str("a hyperparameter value");
    id.hparams.emplace_back(std::move(k), std::move(v));
  }
  id.gguf_size = in.num<uint64_t>("the GGUF file size");
  id.gguf_header_digest = in.num<uint64_t>("the GGUF metadata digest");
  const auto n_weights = in.num<uint32_t>("the tensor count");
  for (uint32_t i = 0; i < n_weights; ++i) {
    WeightId w;
    w.name = in.str("a tensor name");
    w.type = in.str("a tensor type");
    for (int64_t& n : w.ne) n = in.num<int64_t>("a tensor shape");
    id.weights.push_back(std::move(w));
  }
  return id;
}

// The cache's K and V of one layer, as the byte ranges that cover cells [lo, hi]: K's rows, and V's
// channels from cell lo of the first to cell hi of the last (V is [n_cells, n_embd_v]).
struct LayerSpan {
  Tensor* k;
  Tensor* v;
  size_t es, k_row, v_row, k_offset, k_bytes, v_offset, v_bytes;
  int64_t lo;
  LayerSpan(const KvCache& cache, int64_t il, int64_t lo_cell, int64_t hi_cell)
      : k(cache.k(il)), v(cache.v(il)), es(k->nb[0]), k_row(k->nb[1]), v_row(v->nb[1]), lo(lo_cell) {
    const auto n = static_cast<size_t>(hi_cell - lo_cell + 1);
    k_offset = static_cast<size_t>(lo_cell) * k_row;
    k_bytes = n * k_row;
    v_offset = static_cast<size_t>(lo_cell) * es;
    v_bytes = static_cast<size_t>(v->ne[1] - 1) * v_row + n * es;
  }
  // Offsets inside the staged ranges: cell c's K row, and channel j of cell c in V.
  size_t k_at(int64_t c) const { return static_cast<size_t>(c - lo) * k_row; }
  size_t v_at(int64_t j, int64_t c) const {
    return static_cast<size_t>(j) * v_row + static_cast<size_t>(c - lo) * es;
  }
};

// Host memory is read and written channel by channel (a copy each); a device's in one transfer of
// the span, where each copy would be a round trip.
bool in_host_memory(const Tensor& t) { return t.buffer == nullptr || t.buffer->type().is_host(); }

// Positions [p, p + n) whose cells follow each other: V's channels hold each run's elements together.
struct Run {
  size_t p, n;
};
std::vector<Run> runs_of(const std::vector<int64_t>& cells) {
  std::vector<Run> runs;
  for (size_t p = 0; p < cells.size(); ++p)
    if (!runs.empty() && cells[p] == cells[p - 1] + 1)
      ++runs.back().n;
    else
      runs.push_back({p, 1});
  return runs;
}

bool ascending_run(const std::vector<int64_t>& cells) {
  for (size_t p = 1; p < cells.size(); ++p)
    if (cells[p] != cells[0] + static_cast<int64_t>(p)) return false;
  return true;
}

// The cells of `seq` in position order; an Error unless they are exactly positions 0..n-1, unshifted.
std::vector<int64_t> sequence_cells(const KvCache& cache, SeqId seq, size_t n) {
  size_t count = 0;
  for (int64_t i = 0; i < cache.size(); ++i) count += cache.cell(i).has(seq) ? 1 : 0;
  if (count != n)
    raise(ErrorCode::InvalidArgument, "save: {} tokens given, but the cache holds {} cells of sequence {}", n,
          count, seq);
  std::vector<int64_t> cells(n, -1);
  for (int64_t i = 0; i < cache.size(); ++i) {
    const KvCell& c = cache.cell(i);
    if (!c.has(seq)) continue;
    if (c.shift != 0)
      raise(ErrorCode::InvalidArgument,
            "save: sequence {} was shifted (position {} moved by {}) and its K is roped at the old "
            "positions until the next decode",
            seq, c.pos, c.shift);
    if (c.pos < 0 || static_cast<size_t>(c.pos) >= n || cells[static_cast<size_t>(c.pos)] >= 0)
      raise(ErrorCode::InvalidArgument,
            "save: sequence {} does not hold positions 0..{} each once (position {} at cell {}); only a "
            "sequence read from position 0 without removals or shifts can be saved",
            seq, static_cast<int64_t>(n) - 1, c.pos, i);
    cells[static_cast<size_t>(c.pos)] = i;
  }
  return cells;
}

void write_state(const Session& session, SeqId seq, std::span<const Token> tokens, const Out::Sink& sink) {
  const Model& model = session.model();
  const KvCache& cache = session.cache();
  const Hparams& h = model.hparams();
  if (seq < 0) raise(ErrorCode::InvalidArgument, "save: sequence id {} must be >= 0", seq);
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= h.n_vocab)
      raise(ErrorCode::InvalidArgument, "save: token id {} at index {} is outside the vocabulary [0, {})",
            tokens[i], i, h.n_vocab);
  const std::vector<int64_t> cells = sequence_cells(cache, seq, tokens.size());
  const Identity id = identity_of(model);
  const std::string kv_type(name(cache.type()));
  const auto n = static_cast<uint64_t>(tokens.size());
  const auto n_layer = static_cast<uint32_t>(h.n_layer);
  const auto n_embd_k = static_cast<uint64_t>(h.n_embd_kv()),
             n_embd_v = static_cast<uint64_t>(h.n_embd_v_kv());
  const size_t es = traits(cache.type()).block_bytes;
  const uint64_t size = kHeaderBytes + identity_bytes(id) + sizeof(uint32_t) + kv_type.size() +
                        sizeof(uint32_t) + 3 * sizeof(uint64_t) + n * sizeof(Token) +
                        n_layer * n * (n_embd_k + n_embd_v) * es + kChecksumBytes;

  Out out(sink);
  out.raw(kMagic, sizeof kMagic);
  out.num(kSessionFileVersion);
  out.num(size);
  write_identity(out, id);
  out.str(kv_type);
  out.num(n_layer);
  out.num(n_embd_k);
  out.num(n_embd_v);
  out.num(n);
  out.raw(tokens.data(), tokens.size_bytes());
  if (n > 0) {
    const auto [lo, hi] = std::minmax_element(cells.begin(), cells.end());
    const bool run = ascending_run(cells);
    std::vector<std::byte> k_stage, v_stage, channel(n * es);
    for (int64_t il = 0; il < h.n_layer; ++il) {
      const LayerSpan s(cache, il, *lo, *hi);
      TESSERA_ASSERT(s.es == es && s.k_row == n_embd_k * es && s.v->ne[1] == static_cast<int64_t>(n_embd_v));
      k_stage.resize(s.k_bytes);
      tensor_get(*s.k, k_stage.data(), s.k_offset, s.k_bytes);
      if (run) {
        out.raw(k_stage.data(), s.k_bytes);
      } else {
        for (int64_t c : cells) out.raw(k_stage.data() + s.k_at(c), s.k_row);
      }
      if (in_host_memory(*s.v)) {
        const std::vector<Run> runs = runs_of(cells);
        for (uint64_t j = 0; j < n_embd_v; ++j) {
          for (const Run& r : runs)
            tensor_get(*s.v, channel.data() + r.p * es, j * s.v_row + static_cast<size_t>(cells[r.p]) * es,
                       r.n * es);
          out.raw(channel.data(), channel.size());
        }
        continue;
      }
      v_stage.resize(s.v_bytes);
      tensor_get(*s.v, v_stage.data(), s.v_offset, s.v_bytes);
      for (int64_t j = 0; j < static_cast<int64_t>(n_embd_v); ++j) {
        if (run) {
          out.raw(v_stage.data() + s.v_at(j, cells[0]), n * es);
          continue;
        }
        for (size_t p = 0; p < n; ++p)
          std::memcpy(channel.data() + p * es, v_stage.data() + s.v_at(j, cells[p]), es);
        out.raw(channel.data(), channel.size());
      }
    }
  }
  out.checksum();
}

std::vector<std::byte> read_file(const std::string& path) {
  const file_io::ReadableFile file = file_io::open_for_reading(path);
  std::vector<std::byte> bytes(file.size);
  // A file that shrank meanwhile reads short: the size checks name it truncated.
  bytes.resize(file_io::read_at_start(file, bytes.data(), bytes.size(), path));
  return bytes;
}

}  // namespace

std::vector<std::byte> save_sequence_state_bytes(const Session& session, SeqId seq,
                                                 std::span<const Token> tokens) {
  std::vector<std::byte> bytes;
  write_state(session, seq, tokens, [&](const void* p, size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    bytes.insert(bytes.end(), b, b + n);
  });
  return bytes;
}

void save_sequence_state(const Session& session, SeqId seq, std::span<const Token> tokens,
                         const std::string& path) {
  file_io::write_atomically(path,
                            [&](file_io::ByteWriter write) { write_state(session, seq, tokens, write); });
}

std::vector<Token> load_sequence_state_bytes(Session& session, SeqId seq, std::span<const std::byte> bytes,
                                             const std::string& source) {
  const Model& model = session.model();
  KvCache& cache = session.cache();
  const Hparams& h = model.hparams();
  if (seq < 0) raise(ErrorCode::InvalidArgument, "{}: sequence id {} must be >= 0", source, seq);

  // The envelope: magic, version, size, checksum; then nothing is read that the checksum did not see.
  if (bytes.empty()) raise(ErrorCode::CorruptFile, "{}: empty, not a Tessera session file", source);
  if (std::memcmp(bytes.data(), kMagic, std::min(bytes.size(), sizeof kMagic)) != 0)
    raise(ErrorCode::CorruptFile, "{}: not a Tessera session file (no magic \"TESSERAS\")", source);
  if (bytes.size() < kHeaderBytes)
    raise(ErrorCode::CorruptFile, "{}: truncated: {} bytes, shorter than the header", source, bytes.size());
  In in(bytes, source);
  in.take(sizeof kMagic, "the magic");
  const auto version = in.num<uint32_t>("the version");
  if (version != kSessionFileVersion)
    raise(ErrorCode::Unsupported, "{}: session format version {}; this build reads version {}", source,
          version, kSessionFileVersion);
  const auto size = in.num<uint64_t>("the size");
  if (size > bytes.size())
    raise(ErrorCode::CorruptFile, "{}: truncated: {} of its {} bytes", source, bytes.size(), size);
  if (size < bytes.size() || size < kHeaderBytes + kChecksumBytes)
    raise(ErrorCode::CorruptFile, "{}: corrupted: {} bytes where its header says {}", source, bytes.size(),
          size);
  Xxh64 hash;
  hash.update(bytes.data(), bytes.size() - kChecksumBytes);
  uint64_t stored;
  std::memcpy(&stored, bytes.data() + bytes.size() - kChecksumBytes, kChecksumBytes);
  if (hash.digest() != stored)
    raise(ErrorCode::CorruptFile, "{}: corrupted: its checksum is {:016x}, its bytes give {:016x}", source,
          stored, hash.digest());
  In body(bytes.first(bytes.size() - kChecksumBytes), source);
  body.take(kHeaderBytes, "the header");

  // The model, the cache's shape and type.
  const Identity file_id = read_identity(body);
  const std::string difference = identity_difference(file_id, identity_of(model));
  if (!difference.empty())
    raise(ErrorCode::InvalidArgument, "{}: saved with another model: {}", source, difference);
  const std::string kv_type = body.str("the KV type");
  if (kv_type != name(cache.type()))
    raise(ErrorCode::InvalidArgument, "{}: KV type {} (in the file) vs {} (this session's cache)", source,
          kv_type, name(cache.type()));
  const auto n_layer = body.num<uint32_t>("the layer count");
  const auto n_embd_k = body.num<uint64_t>("the K width");
  const auto n_embd_v = body.num<uint64_t>("the V width");
  if (n_layer != static_cast<uint64_t>(h.n_layer) || n_embd_k != static_cast<uint64_t>(h.n_embd_kv()) ||
      n_embd_v != static_cast<uint64_t>(h.n_embd_v_kv()))
    raise(ErrorCode::CorruptFile,
          "{}: corrupted: {} layers of K width {} and V width {} for a model of {}, {}, {}", source, n_layer,
          n_embd_k, n_embd_v, h.n_layer, h.n_embd_kv(), h.n_embd_v_kv());
  const auto n = body.num<uint64_t>("the token count");
  const size_t es = traits(cache.type()).block_bytes;
  const uint64_t per_token = sizeof(Token) + uint64_t{n_layer} * (n_embd_k + n_embd_v) * es;
  if (n > body.left() / per_token || n * per_token != body.left())
    raise(ErrorCode::CorruptFile, "{}: corrupted: {} tokens do not make the {} bytes of tokens and K/V left",
          source, n, body.left());
  std::vector<Token> tokens(n);
  const std::byte* token_bytes = body.take(n * sizeof(Token), "the tokens");
  if (n > 0) std::memcpy(tokens.data(), token_bytes, n * sizeof(Token));
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= h.n_vocab)
      raise(ErrorCode::CorruptFile,
            "{}: corrupted: token id {} at position {} is outside the vocabulary [0, {})", source, tokens[i],
            i, h.n_vocab);

  // Room: the sequence's own cells come free (those no other sequence shares).
  int64_t freed = 0;
  for (int64_t i = 0; i < cache.size(); ++i)
    freed += cache.cell(i).has(seq) && cache.cell(i).seqs.size() == 1 ? 1 : 0;
  const int64_t free_cells = cache.size() - cache.used() + freed;
  if (static_cast<int64_t>(n) > cache.size())
    raise(ErrorCode::InvalidArgument, "{}: the context of {} cells is too small for its {} tokens", source,
          cache.size(), n);
  if (static_cast<int64_t>(n) > free_cells)
    raise(
        ErrorCode::InvalidArgument,
        "{}: its {} tokens do not fit in the KV cache: {} of its {} cells are free (sequence {}'s included)",
        source, n, free_cells, cache.size(), seq);

  // Every check passed: replace the sequence. The K/V go to free cells first, then the cells are
  // recorded, so a device failure in between leaves the sequence empty, never half written.
  cache.seq_remove(seq, -1, -1);
  if (n == 0) return tokens;
  const std::vector<int64_t> cells = cache.find_slots(static_cast<int64_t>(n));
  TESSERA_ASSERT(cells.size() == n);
  const bool run = ascending_run(cells);
  std::vector<std::byte> stage;
  for (int64_t il = 0; il < h.n_layer; ++il) {
    const LayerSpan s(cache, il, cells.front(), cells.back());  // find_slots gives ascending cells
    const std::byte* k = body.take(n * s.k_row, "K");
    if (run) {
      tensor_set(*s.k, k, s.k_offset, s.k_bytes);
    } else {
      stage.resize(s.k_bytes);
      tensor_get(*s.k, stage.data(), s.k_offset, s.k_bytes);
      for (size_t p = 0; p < n; ++p) std::memcpy(stage.data() + s.k_at(cells[p]), k + p * s.k_row, s.k_row);
      tensor_set(*s.k, stage.data(), s.k_offset, s.k_bytes);
    }
    // V's channels interleave with other cells: in host memory each run of cells is written where it
    // goes; on a device the span is read, the sequence's cells written into it, and written back.
    const std::byte* v = body.take(n_embd_v * n * es, "V");
    if (in_host_memory(*s.v)) {
      const std::vector<Run> runs = runs_of(cells);
      for (uint64_t j = 0; j < n_embd_v; ++j)
        for (const Run& r : runs)
          tensor_set(*s.v, v + (j * n + r.p) * es, j * s.v_row + static_cast<size_t>(cells[r.p]) * es,
                     r.n * es);
      continue;
    }
    stage.resize(s.v_bytes);
    tensor_get(*s.v, stage.data(), s.v_offset, s.v_bytes);
    for (uint64_t j = 0; j < n_embd_v; ++j) {
      const std::byte* src = v + j * n * es;
      if (run) {
        std::memcpy(stage.data() + s.v_at(static_cast<int64_t>(j), cells[0]), src, n * es);
        continue;
      }
      for (size_t p = 0; p < n; ++p)
        std::memcpy(stage.data() + s.v_at(static_cast<int64_t>(j), cells[p]), src + p * es, es);
    }
    tensor_set(*s.v, stage.data(), s.v_offset, s.v_bytes);
  }
  std::vector<Pos> positions(n);
  for (size_t p = 0; p < n; ++p) positions[p] = static_cast<Pos>(p);
  cache.store(cells, positions, std::vector<SeqId>(n, seq));
  return tokens;
}

std::vector<Token> load_sequence_state(Session& session, SeqId seq, const std::string& path) {
  const std::vector<std::byte> bytes = read_file(path);
  return load_sequence_state_bytes(session, seq, bytes, path);
}

}  // namespace tessera::llm
