// The pipeline's ranks and messages. Rank 0 sends each micro-batch (tokens, positions, sequences,
// wanted rows, its hidden states, and the KV cells when they are not what the later ranks already
// hold) to rank 1; each later rank decodes it with its stage and sends it on with its own hidden
// states; the last rank sends the micro-batch's logits (or the Error of the rank that failed) back
// to rank 0, one answer per micro-batch, in order.
#include "tessera/mpi/pipeline.h"

#include <cstdlib>
#include <cstring>
#include <numeric>
#include <optional>

#include "core/check.h"
#include "mpi/comm.h"
#include "tessera/cpu.h"
#include "tessera/error.h"

namespace tessera::mpi {

namespace {

enum class Kind : int32_t { Batch = 1, Result = 2, Failure = 3, Stop = 4 };

class Writer {
 public:
  explicit Writer(Kind kind) { put(static_cast<int32_t>(kind)); }
  template <typename T>
  void put(T value) {
    append(&value, sizeof value);
  }
  template <typename T>
  void put_all(std::span<const T> values) {
    put<uint64_t>(values.size());
    append(values.data(), values.size_bytes());
  }
  Message take() { return std::move(bytes_); }

 private:
  void append(const void* p, size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    bytes_.insert(bytes_.end(), b, b + n);
  }
  Message bytes_;
};

class Reader {
 public:
  explicit Reader(const Message& m) : m_(m) {}
  template <typename T>
  T get() {
    T v;
    take(&v, sizeof v);
    return v;
  }
  template <typename T>
  std::vector<T> get_all() {
    const auto n = get<uint64_t>();
    if (n > (m_.size() - at_) / sizeof(T)) malformed();
    std::vector<T> v(static_cast<size_t>(n));
    take(v.data(), v.size() * sizeof(T));
    return v;
  }
  Kind kind() {
    const auto k = get<int32_t>();
    if (k < 1 || k > 4) malformed();
    return static_cast<Kind>(k);
  }

 private:
  void take(void* dst, size_t n) {
    if (n > m_.size() - at_) malformed();
    if (n != 0) std::memcpy(dst, m_.data() + at_, n);
    at_ += n;
  }
  [[noreturn]] static void malformed() {
    raise(ErrorCode::Io, "pipeline: a malformed message between ranks");
  }

  const Message& m_;
  size_t at_ = 0;
};

// One micro-batch as it travels from stage to stage.
struct Chunk {
  bool first = false;          // the first micro-batch of a decode
  std::vector<int32_t> cells;  // KvCache::save_cells() before the decode; empty: as the stage holds
  llm::Batch batch;
  std::vector<float> hidden;  // [size][n_embd]

  Message encode() const {
    Writer w(Kind::Batch);
    w.put<int32_t>(first ? 1 : 0);
    w.put_all<int32_t>(cells);
    w.put_all<int32_t>(batch.tokens);
    w.put_all<int32_t>(batch.positions);
    w.put_all<int32_t>(batch.seq_ids);
    w.put_all<uint8_t>(batch.logits);
    w.put_all<float>(hidden);
    return w.take();
  }
  static Chunk decode(Reader& r) {
    Chunk c;
    c.first = r.get<int32_t>() != 0;
    c.cells = r.get_all<int32_t>();
    c.batch.tokens = r.get_all<int32_t>();
    c.batch.positions = r.get_all<int32_t>();
    c.batch.seq_ids = r.get_all<int32_t>();
    c.batch.logits = r.get_all<uint8_t>();
    c.hidden = r.get_all<float>();
    const size_t n = c.batch.tokens.size();
    if (c.batch.positions.size() != n || c.batch.seq_ids.size() != n || c.batch.logits.size() != n)
      raise(ErrorCode::Io, "pipeline: a malformed micro-batch between ranks");
    return c;
  }
};

Message failure_message(ErrorCode code, const std::string& text) {
  Writer w(Kind::Failure);
  w.put<int32_t>(static_cast<int32_t>(code));
  w.put_all<char>(text);
  return w.take();
}

Message stop_message() { return Writer(Kind::Stop).take(); }

}  // namespace

// Rank 0's side: sends the micro-batches down the pipeline and collects the logits.
class Pipeline::Link final : public llm::StageLink {
 public:
  explicit Link(Comm& comm) : comm_(comm) {}

  void begin(llm::KvCache& cache) override {
    // A decode that failed on this rank after sending micro-batches: their answers are still coming,
    // and the later ranks' caches hold what this one may not: they get the cells again.
    if (pending_ > 0) {
      drain();
      expected_.clear();
    }
    cache_ = &cache;
    before_ = cache.save_cells();
    first_ = true;
  }

  void forward(const llm::Batch& batch, size_t start, size_t n, std::span<const float> hidden) override {
    const auto part = [&](const auto& v) {
      return std::vector(v.begin() + static_cast<std::ptrdiff_t>(start),
                         v.begin() + static_cast<std::ptrdiff_t>(start + n));
    };
    Chunk c;
    c.first = first_;
    if (first_ && before_ != expected_) c.cells = before_;
    c.batch.tokens = part(batch.tokens);
    c.batch.positions = part(batch.positions);
    c.batch.seq_ids = part(batch.seq_ids);
    c.batch.logits = part(batch.logits);
    c.hidden.assign(hidden.begin(), hidden.end());
    comm_.send(1, c.encode());
    first_ = false;
    ++pending_;
  }

  void finish(std::vector<float>& logits) override {
    std::optional<Error> failed;
    for (; pending_ > 0; --pending_) {
      const Message m = comm_.receive(comm_.size() - 1);
      Reader r(m);
      const Kind kind = r.kind();
      if (kind == Kind::Result) {
        const std::vector<float> part = r.get_all<float>();
        logits.insert(logits.end(), part.begin(), part.end());
      } else if (kind == Kind::Failure) {
        const auto code = static_cast<ErrorCode>(r.get<int32_t>());
        const std::vector<char> text = r.get_all<char>();
        if (!failed) failed.emplace(code, std::string(text.begin(), text.end()));
      } else {
        raise(ErrorCode::Io, "pipeline: rank 0 got an unexpected message");
      }
    }
    if (failed) {
      // The decode did not happen: this rank's cells go back to what they were before it (a K
      // shift it began with was done by every stage), and the later ranks get them again.
      cache_->load_cells(before_);
      if (cache_->needs_k_shift()) cache_->k_shift_done();
      expected_.clear();
      logits.clear();
      throw *failed;
    }
    expected_ = cache_->save_cells();
  }

  // Receives (and drops) the answers to micro-batches sent by a decode that did not finish.
  void drain() {
    for (; pending_ > 0; --pending_) comm_.receive(comm_.size() - 1);
  }

 private:
  Comm& comm_;
  llm::KvCache* cache_ = nullptr;
  std::vector<int32_t> before_;    // the cells as the current decode began
  std::vector<int32_t> expected_;  // the cells the later ranks hold (after the last decode)
  bool first_ = false;
  size_t pending_ = 0;  // micro-batches sent whose answer has not been received
};

std::unique_ptr<Pipeline> Pipeline::join() { return std::unique_ptr<Pipeline>(new Pipeline(Comm::join())); }

Pipeline::Pipeline(std::unique_ptr<Comm> comm) : comm_(std::move(comm)) {
  if (comm_->rank() == 0 && comm_->size() > 1) link_ = std::make_unique<Link>(*comm_);
}

Pipeline::~Pipeline() {
  if (link_ != nullptr) {
    try {
      link_->drain();
      comm_->send(1, stop_message());
      comm_->flush();
    } catch (const Error&) {  // the job is ending; MPI_Finalize follows
    }
  }
}

int Pipeline::rank() const noexcept { return comm_->rank(); }
int Pipeline::size() const noexcept { return comm_->size(); }

llm::LayerRange Pipeline::stage(std::span<const double> layer_bytes, std::span<const double> shares) {
  const auto n_layer = static_cast<int64_t>(layer_bytes.size());
  const int n_ranks = size();
  std::vector<double> share(shares.begin(), shares.end());
  if (share.empty()) {
    const double memory =
        static_cast<double>(cpu::cpu_device().memory().total) / comm_->ranks_on_this_machine();
    share = comm_->gather(memory);
  } else if (share.size() != static_cast<size_t>(n_ranks)) {
    raise(ErrorCode::InvalidArgument, "--tensor-split gives {} shares for a pipeline of {} ranks",
          share.size(), n_ranks);
  }
  if (n_layer < n_ranks)
    raise(ErrorCode::InvalidArgument,
          "a model of {} layers cannot be split among {} ranks (one layer each at least)", n_layer, n_ranks);
  const std::vector<size_t> part = llm::split_by_shares(layer_bytes, share, "--tensor-split");
  std::vector<int64_t> first(static_cast<size_t>(n_ranks), -1), end(static_cast<size_t>(n_ranks), -1);
  for (int64_t il = 0; il < n_layer; ++il) {
    const size_t p = part[static_cast<size_t>(il)];
    if (first[p] < 0) first[p] = il;
    end[p] = il + 1;
  }
  for (int r = 0; r < n_ranks; ++r)
    if (first[static_cast<size_t>(r)] < 0)
      raise(
          ErrorCode::InvalidArgument,
          "rank {} gets none of the {} layers at its share ({:.3g} of {:.3g}): give it more (--tensor-split) "
          "or run fewer ranks",
          r, n_layer, share[static_cast<size_t>(r)], std::accumulate(share.begin(), share.end(), 0.0));
  return {first[static_cast<size_t>(rank())], end[static_cast<size_t>(rank())]};
}

void Pipeline::wait_for_stages() { comm_->gather(1.0); }

llm::StageLink& Pipeline::link() {
  if (link_ == nullptr)
    raise(ErrorCode::InvalidArgument,
          "pipeline: only rank 0 of a job of several ranks sends down the pipeline");
  return *link_;
}

void Pipeline::serve(llm::Session& session) {
  const int me = rank(), n = size();
  if (me == 0) raise(ErrorCode::InvalidArgument, "pipeline: rank 0 drives the pipeline, the others serve it");
  const int next = me + 1 == n ? 0 : me + 1;  // the last rank answers rank 0
  bool failed = false;  // a micro-batch of the current decode failed here: skip the rest of it
  for (;;) {
    const Message m = comm_->receive(me - 1);
    Reader r(m);
    const Kind kind = r.kind();
    if (kind == Kind::Stop) {
      if (next != 0) comm_->send(next, stop_message());
      comm_->flush();
      return;
    }
    if (kind == Kind::Failure) {  // an earlier rank's: on to rank 0
      comm_->send(next, Message(m));
      continue;
    }
    if (kind != Kind::Batch) raise(ErrorCode::Io, "pipeline: rank {} got an unexpected message", me);
    Chunk c = Chunk::decode(r);
    if (c.first) failed = false;
    if (failed) {
      comm_->send(next,
                  failure_message(ErrorCode::InvalidArgument,
                                  fmt::format("rank {}: skipped after an earlier micro-batch failed", me)));
      continue;
    }
    try {
      if (!c.cells.empty()) session.cache().load_cells(c.cells);
      const std::vector<float>& out = session.decode(c.batch, c.hidden);
      if (next == 0) {
        Writer w(Kind::Result);
        w.put_all<float>(out);
        comm_->send(0, w.take());
      } else {
        c.hidden = out;
        comm_->send(next, c.encode());
      }
    } catch (const Error& e) {
      failed = true;
      comm_->send(next, failure_message(e.code(), fmt::format("rank {} of {}: {}", me, n, e.what())));
    }
  }
}

void Pipeline::abort(int code) {
  comm_->abort(code);
  std::_Exit(code);  // not reached: Comm::abort ends the process
}

}  // namespace tessera::mpi
