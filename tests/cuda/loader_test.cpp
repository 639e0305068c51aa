// The CUDA loader against fake libraries (tests/cuda/fake_libcuda.c, fake_nvrtc.c): a missing
// library, something that is not a driver, the toolkit's stub, a driver with no device, a driver
// too old for a symbol, and a working fake with two devices; every outcome is a one-line reason, and
// `tessera devices` prints it. No NVIDIA software is needed.
#include "cuda/loader.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "cuda/fake_cuda.h"
#include "support/cli.h"
#include "tessera/error.h"

using namespace tessera;
using tessera::test::fake_cuda;

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST(CudaLoader, AMissingLibraryIsAReasonNamingIt) {
  const auto load = cuda::load_driver("/nonexistent/libcuda.so.1");
  EXPECT_EQ(load.driver, nullptr);
  EXPECT_EQ(load.device_count, 0);
  EXPECT_TRUE(starts_with(load.reason, "/nonexistent/libcuda.so.1 cannot be loaded: ")) << load.reason;
}

TEST(CudaLoader, NoSystemDriverMeansNoNvidiaDriver) {
  if (void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    dlclose(h);
    GTEST_SKIP() << "this machine has an NVIDIA driver";
  }
  const auto load = cuda::load_driver("libcuda.so.1");
  EXPECT_EQ(load.driver, nullptr);
  EXPECT_TRUE(starts_with(load.reason, "libcuda.so.1 not found: no NVIDIA driver (")) << load.reason;
}

TEST(CudaLoader, ALibraryThatIsNoDriverIsNamed) {
  const auto load = cuda::load_driver("libm.so.6");
  EXPECT_EQ(load.driver, nullptr);
  EXPECT_EQ(load.reason, "symbol cuInit missing from libm.so.6: not a CUDA driver, or one too old");
}

TEST(CudaLoader, TheToolkitsStubLibraryIsNamedByItsError) {
  const auto load = cuda::load_driver(fake_cuda("stub"));
  EXPECT_EQ(load.driver, nullptr);
  EXPECT_EQ(load.reason, "cuInit failed: CUDA_ERROR_STUB_LIBRARY (CUDA driver is a stub library)");
}

TEST(CudaLoader, ADriverWithNoDeviceSaysSo) {
  const auto load = cuda::load_driver(fake_cuda("no_device"));
  EXPECT_EQ(load.driver, nullptr);
  EXPECT_EQ(load.reason, "cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)");
}

TEST(CudaLoader, ADriverTooOldForASymbolNamesTheSymbolAndItsVersion) {
  // No cuGetProcAddress there: the versioned names are looked up directly, and cuMemMap is absent.
  const auto load = cuda::load_driver(fake_cuda("old"));
  EXPECT_EQ(load.driver, nullptr);
  EXPECT_EQ(load.reason, "symbol cuMemMap missing: driver too old (CUDA 10.2)");
}

TEST(CudaLoader, AWorkingDriverResolvesEveryEntryPointThroughCuGetProcAddress) {
  const auto& load = tessera::test::fake_devices();
  ASSERT_NE(load.driver, nullptr) << load.reason;
  EXPECT_TRUE(load.reason.empty());
  EXPECT_EQ(load.device_count, 2);
  EXPECT_EQ(load.driver->version, 12040);
  EXPECT_EQ(cuda::version_string(load.driver->version), "12.4");
  EXPECT_NE(load.driver->cuMemMap, nullptr);
  EXPECT_NE(load.driver->cuLaunchHostFunc, nullptr);
  // Every entry point but the four plain-dlsym ones came from cuGetProcAddress, _v2 where versioned.
  EXPECT_GE(tessera::test::fake_counter("fake_cuda_proc_lookups"), 42);
  Dl_info info{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>(load.driver->cuMemAlloc), &info), 0);
  EXPECT_STREQ(info.dli_sname, "cuMemAlloc_v2");
}

TEST(CudaLoader, TheEnvironmentNamesTheDriverToLoad) {
  setenv("TESSERA_CUDA_DRIVER", fake_cuda("no_device").c_str(), 1);
  const auto load = cuda::load_driver();
  unsetenv("TESSERA_CUDA_DRIVER");
  EXPECT_TRUE(starts_with(load.reason, "cuInit failed: CUDA_ERROR_NO_DEVICE")) << load.reason;
}

TEST(CudaLoader, ErrorsNameTheDeviceTheCallAndTheCudaError) {
  const auto& load = tessera::test::fake_devices();
  ASSERT_NE(load.driver, nullptr) << load.reason;
  const cuda::Driver& d = *load.driver;
  EXPECT_NO_THROW(cuda::check(d, cuda::CUDA_SUCCESS, "CUDA0", "cuMemAlloc"));
  try {
    cuda::check(d, cuda::CUDA_ERROR_OUT_OF_MEMORY, "CUDA0", "cuMemAlloc", "64.0 MiB");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::OutOfMemory);
    EXPECT_STREQ(e.what(), "CUDA0: cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory): 64.0 MiB");
  }
  try {
    cuda::check(d, cuda::CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA1", "cuEventSynchronize");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::DeviceError);
    EXPECT_STREQ(e.what(),
                 "CUDA1: cuEventSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was "
                 "encountered)");
  }
  // A code the driver does not name: our name for it, else its number.
  EXPECT_EQ(d.error_name(cuda::CUDA_ERROR_LAUNCH_FAILED), "CUDA_ERROR_LAUNCH_FAILED");
  EXPECT_EQ(d.error_name(12345), "CUDA error 12345");
}

TEST(CudaLoader, NvrtcIsLoadedWithItsBuiltinsOrNamesWhatIsMissing) {
  const auto ok = cuda::load_nvrtc(TESSERA_FAKE_NVRTC_OK);
  ASSERT_NE(ok.nvrtc, nullptr) << ok.reason;
  EXPECT_EQ(ok.nvrtc->major, 99);
  EXPECT_EQ(ok.nvrtc->minor, 1);
  EXPECT_TRUE(contains(ok.nvrtc->builtins, "/nvrtc_ok/libnvrtc-builtins.so.99.1")) << ok.nvrtc->builtins;
  const auto no_builtins = cuda::load_nvrtc(TESSERA_FAKE_NVRTC_NO_BUILTINS);
  EXPECT_EQ(no_builtins.nvrtc, nullptr);
  EXPECT_TRUE(starts_with(no_builtins.reason, "libnvrtc-builtins.so.99.1 not found beside "))
      << no_builtins.reason;
  const auto missing = cuda::load_nvrtc("/nonexistent/libnvrtc.so.12");
  EXPECT_EQ(missing.nvrtc, nullptr);
  EXPECT_TRUE(starts_with(missing.reason, "NVRTC not found, so no CUDA kernel can be compiled ("))
      << missing.reason;
}

TEST(CudaLoader, CublasIsLoadedOnlyWhenThereAndNamesWhatIsMissing) {
  const auto missing = cuda::load_cublas("/nonexistent/libcublas.so.12");
  EXPECT_EQ(missing.cublas, nullptr);
  EXPECT_TRUE(starts_with(missing.reason, "cuBLAS not found (")) << missing.reason;
  const auto wrong = cuda::load_cublas("libm.so.6");
  EXPECT_EQ(wrong.cublas, nullptr);
  EXPECT_EQ(wrong.reason, "symbol cublasCreate_v2 missing from libm.so.6: cuBLAS too old");
}

// ---------------------------------------------------------------- the CLI

TEST(CudaDevicesCli, SaysWhyThereIsNoCudaDevice) {
  using testing_support::run_cli;
  auto r = run_cli("devices", "TESSERA_CUDA_DRIVER=/nonexistent/libcuda.so.1");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "CPU ")) << r.out;
  EXPECT_TRUE(contains(r.out, "CUDA: no device (/nonexistent/libcuda.so.1 cannot be loaded: ")) << r.out;
  r = run_cli("devices", "TESSERA_CUDA_DRIVER=" + fake_cuda("no_device"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(contains(r.out,
                       "CUDA: no device (cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is "
                       "detected))"))
      << r.out;
  r = run_cli("devices", "TESSERA_CUDA_DRIVER=" + fake_cuda("old"));
  EXPECT_TRUE(contains(r.out, "CUDA: no device (symbol cuMemMap missing: driver too old (CUDA 10.2))"))
      << r.out;
}

TEST(CudaDevicesCli, ListsEveryDeviceOfADriverWithItsMemoryAndArchitecture) {
  const auto r = testing_support::run_cli("devices", "TESSERA_CUDA_DRIVER=" + fake_cuda("devices"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_FALSE(contains(r.out, "CUDA: no device")) << r.out;
  for (const char* row :
       {"CUDA0      gpu               1024 MiB  Fake GPU Alpha (sm_90, 132 SMs, PCI 0000:41:00.0, "
        "CUDA driver 12.4)",
        "CUDA1      gpu               2048 MiB  Fake GPU Beta (sm_86, 84 SMs, PCI 0000:42:00.0, "
        "CUDA driver 12.4)"})
    EXPECT_TRUE(contains(r.out, row)) << r.out;
}
