#pragma once
// A model's layers split across the processes of an MPI job (`mpirun -np N tessera ... --pipeline`),
// each on its own machine or share of one: rank r loads and computes its stage (a contiguous range
// of layers, llm::LoadOptions::stage) and holds its layers' KV cache; hidden states go from rank to
// rank, each micro-batch as soon as it is computed (so the stages work on successive micro-batches
// at once), and the last rank sends the logits back to rank 0, which runs everything else (the
// tokenizer, sampling, the command's output or server). Every rank runs the same command. A
// Pipeline, its link and serve are used by one thread at a time (a server's engine thread decodes
// through the link while the thread that joined waits).
#include <cstdint>
#include <memory>
#include <span>

#include "tessera/llm/model.h"
#include "tessera/llm/session.h"

namespace tessera::mpi {

class Comm;

class Pipeline {
 public:
  // Joins the job mpirun started (a process run without mpirun is a job of one rank).
  // Error(Unsupported) in a build without MPI, Error(Io) when MPI cannot start.
  static std::unique_ptr<Pipeline> join();
  // Rank 0 tells the other ranks to stop (their serve returns); every rank then leaves the job.
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  int rank() const noexcept;
  int size() const noexcept;

  // This rank's layers, rank r taking a contiguous range whose bytes (layer_bytes: each layer's,
  // llm::stage_layer_bytes) are in proportion to shares[r] (llm::split_by_shares); empty shares:
  // each rank's share is its machine's memory divided among the job's ranks on that machine. Every
  // rank calls it, with the same arguments. Error(InvalidArgument) when shares are not one per rank
  // or a rank would get no layer.
  llm::LayerRange stage(std::span<const double> layer_bytes, std::span<const double> shares);

  // Every rank calls it once its stage is loaded; it returns when every rank has (a server says it
  // is ready only then). A rank whose load fails ends the job instead (abort).
  void wait_for_stages();

  // Rank 0, when the job has several ranks: the link its Session sends hidden states through
  // (Session::set_stage_link) and gets the logits back from.
  llm::StageLink& link();

  // Every rank but 0: decodes the batches rank 0 sends through `session` (of this rank's stage),
  // passing hidden states on (or, on the last rank, logits back to rank 0), until rank 0 stops. A
  // decode that fails reaches rank 0 as its Error, and this rank goes on serving.
  void serve(llm::Session& session);

  // Ends every rank of the job at once, with this exit code: what a rank does on an error outside
  // a decode (a model that does not load on one machine), which would otherwise leave the others
  // waiting for it.
  [[noreturn]] void abort(int code);

 private:
  class Link;
  explicit Pipeline(std::unique_ptr<Comm> comm);

  std::unique_ptr<Comm> comm_;
  std::unique_ptr<Link> link_;
};

}  // namespace tessera::mpi
