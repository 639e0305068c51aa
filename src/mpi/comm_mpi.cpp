// The pipeline's messages over Open MPI: MPI_COMM_WORLD, one tag, byte messages.
// The C API only (Open MPI's C++ bindings would need their own library).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <deque>
#include <string_view>
#include <thread>

#include "core/check.h"
#include "mpi/comm.h"

namespace tessera::mpi {

namespace {

constexpr int kTag = 7;

void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int n = 0;
  MPI_Error_string(rc, text, &n);
  raise(ErrorCode::Io, "MPI: {} failed: {}", what, std::string_view(text, static_cast<size_t>(n)));
}

class MpiComm final : public Comm {
 public:
  MpiComm() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized != 0) raise(ErrorCode::InvalidArgument, "MPI: a process joins one pipeline only");
    int provided = 0;
    // One thread at a time calls MPI, not always the one that joined: a server's engine decodes on
    // its own thread (the compute threads never call it).
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
      raise(ErrorCode::Io, "MPI: cannot start (is this process run by mpirun?)");
    if (provided < MPI_THREAD_SERIALIZED) {
      MPI_Finalize();
      raise(ErrorCode::Unsupported, "MPI: this MPI library cannot be called from more than one thread");
    }
    // Errors come back as codes (check_mpi makes them Errors) instead of ending the job.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }

  ~MpiComm() override {
    for (Pending& p : pending_) MPI_Wait(&p.request, MPI_STATUS_IGNORE);
    MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void send(int to, Message message) override {
    if (message.size() > static_cast<size_t>(INT_MAX))
      raise(ErrorCode::InvalidArgument, "MPI: a message of {} bytes is more than one send carries",
            message.size());
    reap();
    Pending& p = pending_.emplace_back(Pending{std::move(message), MPI_REQUEST_NULL});
    check_mpi(MPI_Isend(p.bytes.data(), static_cast<int>(p.bytes.size()), MPI_BYTE, to, kTag, MPI_COMM_WORLD,
                        &p.request),
              "MPI_Isend");
  }

  Message receive(int from) override {
    // Open MPI's blocking probe keeps a core busy for as long as it waits, and a served pipeline's
    // ranks wait between requests for hours. So it probes at full speed for the first 100 ms only
    // (a decode's messages come sooner: nothing added to their latency), then sleeps between
    // probes, 50 us doubling to 2 ms: an idle rank costs next to nothing, a long wait at most 2 ms.
    using std::chrono::steady_clock;
    constexpr auto kFullSpeed = std::chrono::milliseconds(100);
    constexpr auto kLongestPause = std::chrono::microseconds(2000);
    const auto start = steady_clock::now();
    auto pause = std::chrono::microseconds(50);
    MPI_Status status;
    for (int arrived = 0;;) {
      check_mpi(MPI_Iprobe(from, kTag, MPI_COMM_WORLD, &arrived, &status), "MPI_Iprobe");
      if (arrived != 0) break;
      if (steady_clock::now() - start < kFullSpeed) continue;
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, kLongestPause);
    }
    int n = 0;
    check_mpi(MPI_Get_count(&status, MPI_BYTE, &n), "MPI_Get_count");
    Message m(static_cast<size_t>(n));
    check_mpi(MPI_Recv(m.data(), n, MPI_BYTE, from, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
    return m;
  }

  void flush() override {
    while (!pending_.empty()) {
      check_mpi(MPI_Wait(&pending_.front().request, MPI_STATUS_IGNORE), "MPI_Wait");
      pending_.pop_front();
    }
  }

  std::vector<double> gather(double value) override {
    std::vector<double> all(static_cast<size_t>(size_));
    check_mpi(MPI_Allgather(&value, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD),
              "MPI_Allgather");
    return all;
  }

  int ranks_on_this_machine() override {
    MPI_Comm local;
    check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local),
              "MPI_Comm_split_type");
    int n = 1;
    MPI_Comm_size(local, &n);
    MPI_Comm_free(&local);
    return n;
  }

  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; if it did, this process still ends
  }

 private:
  struct Pending {
    Message bytes;
    MPI_Request request;
  };

  // Drops the sends already delivered (the front ones: sends complete in order per receiver, and
  // a delivered message's buffer is no longer needed).
  void reap() {
    while (!pending_.empty()) {
      int done = 0;
      check_mpi(MPI_Test(&pending_.front().request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done == 0) return;
      pending_.pop_front();
    }
  }

  int rank_ = 0, size_ = 1;
  std::deque<Pending> pending_;  // a deque keeps each message's bytes where MPI was told they are
};

}  // namespace

std::unique_ptr<Comm> Comm::join() { return std::make_unique<MpiComm>(); }

}  // namespace tessera::mpi
