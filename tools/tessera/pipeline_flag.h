#pragma once
// --pipeline, for the commands that decode with one model (run, logits, serve): under mpirun, each
// rank loads and computes a contiguous range of the layers (mpi/pipeline.h); rank 0 does the
// command's work and output, the others serve their stage until it is done.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "split_flags.h"
#include "tessera/error.h"
#include "tessera/gguf.h"
#include "tessera/llm/model.h"
#include "tessera/llm/session.h"
#include "tessera/mpi/pipeline.h"

namespace tessera::cli {

struct PipelineFlag {
  bool on = false;

  void add_to(CLI::App* cmd) {
    cmd->add_flag("--pipeline", on,
                  "run as one rank of an MPI job (mpirun -np N tessera ...): each rank computes a contiguous "
                  "range of the layers, by its machine's memory or --tensor-split (one share per rank)");
  }

  // --pipeline runs each rank's layers on its CPU.
  static void refuse_devices(int n_gpu_layers, const std::string& device) {
    if (n_gpu_layers > 0 || !device.empty())
      throw Error(ErrorCode::Unsupported,
                  "--pipeline runs each rank's layers on its CPU: --n-gpu-layers and --device are not "
                  "implemented with it");
  }

  // This rank's layers of the model `path`, balanced by their bytes (--tensor-split: one share per
  // rank); `use_mmap`: the first stage maps its token embeddings (llm::LoadOptions::use_mmap).
  static llm::LayerRange stage(mpi::Pipeline& pipeline, const std::string& path,
                               const std::vector<float>& tensor_split, bool use_mmap) {
    const std::vector<double> bytes =
        llm::stage_layer_bytes(gguf::File::open(path, {.metadata_only = true}), use_mmap);
    const std::vector<double> shares(tensor_split.begin(), tensor_split.end());
    return pipeline.stage(bytes, shares);
  }

  // Ends the whole job with `e` (its message printed first, naming the rank), so that no rank waits
  // forever for this one.
  [[noreturn]] static void end_job(mpi::Pipeline& pipeline, const Error& e) {
    if (pipeline.size() > 1)
      std::fprintf(stderr, "tessera: error: rank %d of %d: %s\n", pipeline.rank(), pipeline.size(), e.what());
    else
      std::fprintf(stderr, "tessera: error: %s\n", e.what());
    std::fflush(stderr);
    pipeline.abort(1);
  }

  // Runs `command` with the model `path` as this process's part of the job: `load` gets the stage
  // to load (options.stage set); rank 0 runs the rest of `command` with the session linked down the
  // pipeline, the other ranks serve their stage instead. An Error on a rank other than 0 ends the
  // whole job, so that no rank waits forever for it.
  void run(const std::string& path, llm::LoadOptions options, const SplitFlags& split,
           const std::function<void(llm::LoadOptions&, const std::function<bool(llm::Session&)>&)>& command)
      const {
    if (!on) {
      split.apply(options);
      command(options, [](llm::Session&) { return true; });
      return;
    }
    refuse_devices(options.n_gpu_layers, options.device);
    auto pipeline = mpi::Pipeline::join();
    try {
      options.stage = stage(*pipeline, path, split.tensor_split, options.use_mmap);
      if (pipeline->rank() != 0) options.progress = nullptr;
      command(options, [&](llm::Session& session) {
        if (pipeline->rank() != 0) {
          pipeline->serve(session);
          return false;
        }
        if (pipeline->size() > 1) session.set_stage_link(&pipeline->link());
        return true;
      });
    } catch (const Error& e) {
      if (pipeline->rank() == 0) throw;  // the pipeline's end tells the other ranks to stop
      end_job(*pipeline, e);
    }
  }
};

}  // namespace tessera::cli
