// NVRTC compiles to CUBIN with the on-disk cache (cuda/compiler.h), against the fake NVRTC
// (tests/cuda/fake_nvrtc.c: its "CUBIN" is the options and the source, "#error" fails, and it counts
// its compiles). No NVIDIA software is needed.
#include "cuda/compiler.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tessera/error.h"

using namespace tessera;

namespace {

const cuda::Nvrtc& fake_nvrtc() {
  static const cuda::NvrtcLoad load = cuda::load_nvrtc(TESSERA_FAKE_NVRTC_OK);
  EXPECT_NE(load.nvrtc, nullptr) << load.reason;
  return *load.nvrtc;
}

// How many programs the fake has compiled in this process.
int compiles() {
  void* h = dlopen(TESSERA_FAKE_NVRTC_OK, RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(h, nullptr);
  auto* count = reinterpret_cast<int (*)()>(dlsym(h, "fake_nvrtc_compiles"));
  EXPECT_NE(count, nullptr);
  const int n = count != nullptr ? count() : -1;
  if (h != nullptr) dlclose(h);
  return n;
}

std::string text(const std::vector<unsigned char>& bytes) { return {bytes.begin(), bytes.end()}; }

std::filesystem::path temp_dir() {
  return std::filesystem::temp_directory_path() / ("tessera-cubin-cache-" + std::to_string(::getpid()));
}

const cuda::KernelProgram kScale{
    "scale", "extern \"C\" __global__ void scale(float* x) { x[0] *= 2; }\n", {"-default-device", "-DQK=32"}};

}  // namespace

TEST(CudaCompiler, ACubinIsCompiledOncePerSourceArchitectureAndOptions) {
  const cuda::Nvrtc& nvrtc = fake_nvrtc();
  const auto dir = temp_dir();
  std::filesystem::remove_all(dir);
  const BinaryCache cache(dir.string());
  cuda::CompileStats stats;
  const int before = compiles();
  const auto cubin = cuda::compile_cubin(nvrtc, cache, kScale, 9, 0, &stats);
  // The architecture first, then the program's options, as NVRTC was given them.
  EXPECT_EQ(text(cubin), "FAKE-CUBIN\n--gpu-architecture=sm_90\n-default-device\n-DQK=32\n" + kScale.source);
  EXPECT_EQ(stats.compiled, 1);
  EXPECT_EQ(compiles(), before + 1);
  // Again (another process would do the same): read from the cache, NVRTC not run.
  EXPECT_EQ(cuda::compile_cubin(nvrtc, cache, kScale, 9, 0, &stats), cubin);
  EXPECT_EQ(stats.loaded, 1);
  EXPECT_EQ(compiles(), before + 1);
  // Another architecture, other options or another source: compiled.
  EXPECT_NE(text(cuda::compile_cubin(nvrtc, cache, kScale, 8, 0, &stats)).find("sm_80"), std::string::npos);
  cuda::KernelProgram other = kScale;
  other.options = {"-DQK=256"};
  cuda::compile_cubin(nvrtc, cache, other, 9, 0, &stats);
  other.source += "// changed\n";
  cuda::compile_cubin(nvrtc, cache, other, 9, 0, &stats);
  EXPECT_EQ(stats.compiled, 4);
  EXPECT_EQ(compiles(), before + 4);
  // An empty entry (a cache emptied by hand, a full disk) is no CUBIN: compiled again.
  const std::string entry = cache.path(
      "scale", {"NVRTC 99.1", "--gpu-architecture=sm_90\n-default-device\n-DQK=32", kScale.source}, ".cubin");
  ASSERT_TRUE(std::filesystem::exists(entry)) << entry;
  std::ofstream(entry, std::ios::trunc).close();
  EXPECT_EQ(cuda::compile_cubin(nvrtc, cache, kScale, 9, 0, &stats), cubin);
  EXPECT_EQ(compiles(), before + 5);
  std::filesystem::remove_all(dir);

  // Without a cache every call compiles.
  const BinaryCache none("");
  cuda::compile_cubin(nvrtc, none, kScale, 9, 0);
  cuda::compile_cubin(nvrtc, none, kScale, 9, 0);
  EXPECT_EQ(compiles(), before + 7);
}

TEST(CudaCompiler, ACompileErrorNamesTheProgramTheArchitectureAndNvrtcsLog) {
  const cuda::KernelProgram broken{"broken", "#error no kernel here\n", {}};
  try {
    cuda::compile_cubin(fake_nvrtc(), BinaryCache(""), broken, 9, 0);
    ADD_FAILURE() << "a program with #error compiled";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.code(), ErrorCode::DeviceError);
    EXPECT_NE(m.find("kernel program broken"), std::string::npos) << m;
    EXPECT_NE(m.find("nvrtcCompileProgram (NVRTC 99.1, sm_90)"), std::string::npos) << m;
    EXPECT_NE(m.find("NVRTC_ERROR_COMPILATION"), std::string::npos) << m;
    EXPECT_NE(m.find("kernel.cu(1): error: #error no kernel here"), std::string::npos) << m;
  }
}

TEST(CudaCompiler, TheCacheFolderComesFromTheEnvironment) {
  setenv("TESSERA_CUDA_CACHE_DIR", "/some/where", 1);
  EXPECT_EQ(cuda::default_cubin_cache_dir(), "/some/where");
  setenv("TESSERA_CUDA_CACHE_DIR", "off", 1);
  EXPECT_EQ(cuda::default_cubin_cache_dir(), "");
  unsetenv("TESSERA_CUDA_CACHE_DIR");
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(cuda::default_cubin_cache_dir(), "/xdg/tessera/cuda");
  unsetenv("XDG_CACHE_HOME");
}
