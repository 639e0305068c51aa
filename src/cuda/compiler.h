#pragma once
// CUDA C kernels compiled by NVRTC to CUBIN for one device architecture, kept on disk: a program is
// compiled once per source, options, architecture and NVRTC version; later processes load the CUBIN
// from the cache (core/binary_cache.h), so a session's start pays no compile.
#include <string>
#include <vector>

#include "core/binary_cache.h"
#include "cuda/loader.h"

namespace tessera::cuda {

struct KernelProgram {
  std::string name;                  // names the cache entry and the messages ("rms_norm")
  std::string source;                // CUDA C
  std::vector<std::string> options;  // NVRTC options besides the architecture ("-default-device", "-DQK=32")
};

struct CompileStats {
  int compiled = 0;  // NVRTC runs
  int loaded = 0;    // CUBINs read from the cache
};

// The CUBIN of `program` for compute capability major.minor (--gpu-architecture=sm_XY): from
// `cache` when it holds one for this source, options, architecture and NVRTC, else compiled and
// stored. Error(DeviceError) naming the program, the architecture and NVRTC's error and log when it
// does not compile.
std::vector<unsigned char> compile_cubin(const Nvrtc& nvrtc, const BinaryCache& cache,
                                         const KernelProgram& program, int major, int minor,
                                         CompileStats* stats = nullptr);

// Where CUBINs are cached: $TESSERA_CUDA_CACHE_DIR ("off": nowhere), else $XDG_CACHE_HOME/tessera/cuda,
// else ~/.cache/tessera/cuda; "" when none of them is set.
std::string default_cubin_cache_dir();

}  // namespace tessera::cuda
