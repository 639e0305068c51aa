// NVRTC compiles of CUDA C kernels to CUBIN, cached on disk (cuda/compiler.h).
#include "cuda/compiler.h"

#include <fmt/format.h>

#include "tessera/error.h"

namespace tessera::cuda {
namespace {

// The program handle, destroyed on every path.
class Program {
 public:
  Program(const Nvrtc& nvrtc, const KernelProgram& p) : nvrtc_(nvrtc) {
    const nvrtcResult r =
        nvrtc.nvrtcCreateProgram(&program_, p.source.c_str(), (p.name + ".cu").c_str(), 0, nullptr, nullptr);
    if (r != NVRTC_SUCCESS) fail(p.name, "nvrtcCreateProgram", r, "");
  }
  ~Program() {
    if (program_ != nullptr) nvrtc_.nvrtcDestroyProgram(&program_);
  }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  nvrtcProgram get() const noexcept { return program_; }

  std::string log() const {
    size_t n = 0;
    if (nvrtc_.nvrtcGetProgramLogSize(program_, &n) != NVRTC_SUCCESS || n == 0) return {};
    std::string text(n, '\0');
    if (nvrtc_.nvrtcGetProgramLog(program_, text.data()) != NVRTC_SUCCESS) return {};
    while (!text.empty() && (text.back() == '\0' || text.back() == '\n')) text.pop_back();
    return text;
  }

  [[noreturn]] void fail(const std::string& name, const char* call, nvrtcResult r,
                         const std::string& log) const {
    const char* what = nvrtc_.nvrtcGetErrorString != nullptr ? nvrtc_.nvrtcGetErrorString(r) : nullptr;
    throw Error(ErrorCode::DeviceError, fmt::format("CUDA: kernel program {}: {} failed: {}{}", name, call,
                                                    what != nullptr ? what : fmt::format("NVRTC error {}", r),
                                                    log.empty() ? "" : "\n" + log));
  }

 private:
  const Nvrtc& nvrtc_;
  nvrtcProgram program_ = nullptr;
};

}  // namespace

std::vector<unsigned char> compile_cubin(const Nvrtc& nvrtc, const BinaryCache& cache,
                                         const KernelProgram& program, int major, int minor,
                                         CompileStats* stats) {
  const std::string arch = fmt::format("--gpu-architecture=sm_{}{}", major, minor);
  const std::string compiler = fmt::format("NVRTC {}.{}", nvrtc.major, nvrtc.minor);
  std::string options = arch;
  for (const std::string& o : program.options) options += "\n" + o;
  const std::string path = cache.path(program.name, {compiler, options, program.source}, ".cubin");
  if (std::vector<unsigned char> cubin = cache.load(path); !cubin.empty()) {
    if (stats != nullptr) ++stats->loaded;
    return cubin;
  }
  Program p(nvrtc, program);
  std::vector<const char*> args = {arch.c_str()};
  for (const std::string& o : program.options) args.push_back(o.c_str());
  if (const nvrtcResult r = nvrtc.nvrtcCompileProgram(p.get(), static_cast<int>(args.size()), args.data());
      r != NVRTC_SUCCESS)
    p.fail(program.name, fmt::format("nvrtcCompileProgram ({}, sm_{}{})", compiler, major, minor).c_str(), r,
           p.log());
  size_t size = 0;
  if (const nvrtcResult r = nvrtc.nvrtcGetCUBINSize(p.get(), &size); r != NVRTC_SUCCESS)
    p.fail(program.name, "nvrtcGetCUBINSize", r, p.log());
  if (size == 0)
    throw Error(ErrorCode::DeviceError, fmt::format("CUDA: kernel program {}: NVRTC ({}) gave an empty CUBIN",
                                                    program.name, compiler));
  std::vector<unsigned char> cubin(size);
  if (const nvrtcResult r = nvrtc.nvrtcGetCUBIN(p.get(), reinterpret_cast<char*>(cubin.data()));
      r != NVRTC_SUCCESS)
    p.fail(program.name, "nvrtcGetCUBIN", r, p.log());
  if (stats != nullptr) ++stats->compiled;
  cache.store(path, cubin);
  return cubin;
}

std::string default_cubin_cache_dir() { return BinaryCache::default_dir("TESSERA_CUDA_CACHE_DIR", "cuda"); }

}  // namespace tessera::cuda
