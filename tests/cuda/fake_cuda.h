#pragma once
// The fake CUDA libraries of tests/cuda/ (built by tests/cuda/CMakeLists.txt) and the controls the
// working one exports (fake_libcuda.c).
#include <dlfcn.h>

#include <string>

#include "cuda/loader.h"

namespace tessera::test {

inline std::string fake_cuda(const char* variant) {
  return std::string(TESSERA_FAKE_CUDA_DIR) + "/libtessera_fake_cuda_" + variant + ".so";
}

// The two-device fake, loaded (once per process: every load shares its state).
inline const cuda::DriverLoad& fake_devices() {
  static const cuda::DriverLoad load = cuda::load_driver(fake_cuda("devices"));
  return load;
}

// A control function of the loaded two-device fake.
template <typename Fn>
Fn fake_control(const char* name) {
  (void)fake_devices();
  void* handle = dlopen(fake_cuda("devices").c_str(), RTLD_NOW | RTLD_NOLOAD);
  Fn fn = handle != nullptr ? reinterpret_cast<Fn>(dlsym(handle, name)) : nullptr;
  if (handle != nullptr) dlclose(handle);
  return fn;
}

inline int fake_counter(const char* name) { return fake_control<int (*)()>(name)(); }

// Makes the fake's `symbol` return `code` while in scope.
class FakeFailure {
 public:
  FakeFailure(const char* symbol, int code) { fail()(symbol, code); }
  ~FakeFailure() { fail()(nullptr, 0); }
  FakeFailure(const FakeFailure&) = delete;
  FakeFailure& operator=(const FakeFailure&) = delete;

 private:
  static void (*fail())(const char*, int) {
    return fake_control<void (*)(const char*, int)>("fake_cuda_fail");
  }
};

}  // namespace tessera::test
