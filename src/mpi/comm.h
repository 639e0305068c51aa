#pragma once
// The messages a pipeline's ranks exchange, and nothing else of MPI: byte messages between ranks in
// order, each rank's memory, and ending the job. One implementation over Open MPI (comm_mpi.cpp),
// one for builds without it (comm_none.cpp: joining is an Error).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace tessera::mpi {

using Message = std::vector<std::byte>;

class Comm {
 public:
  // Initializes MPI (called by one thread at a time from then on) and joins MPI_COMM_WORLD.
  // Error(Unsupported) in a build without MPI, Error(Io) when MPI cannot start.
  static std::unique_ptr<Comm> join();
  virtual ~Comm() = default;  // finalizes MPI

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Sends without waiting for the receiver (the message is kept until it is delivered); messages
  // from one rank to another arrive in the order sent.
  virtual void send(int to, Message message) = 0;
  // The next message from `from`, waiting for it.
  virtual Message receive(int from) = 0;
  // Waits until every message this rank sent was delivered.
  virtual void flush() = 0;
  // Every rank's `value`, in rank order (collective).
  virtual std::vector<double> gather(double value) = 0;
  // The ranks on this rank's machine (collective).
  virtual int ranks_on_this_machine() = 0;
  // Ends every rank of the job now, with this exit code.
  [[noreturn]] virtual void abort(int code) = 0;
};

}  // namespace tessera::mpi
