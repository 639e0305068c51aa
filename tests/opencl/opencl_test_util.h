#pragma once
// Shared by the OpenCL tests: two PoCL devices, placing a context's tensors in a device buffer,
// random inputs of every type.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tessera/buffer.h"
#include "tessera/context.h"
#include "tessera/device.h"
#include "tessera/quant.h"

namespace tessera::test {

// Before any OpenCL call (static initialization runs before main): two PoCL CPU devices, so
// multi-device paths run for real. A value already in the environment wins.
inline const bool kPoclDevices = [] {
  setenv("POCL_DEVICES", "pthread pthread", 0);
  return true;
}();

// OpenCL device i from the registry (the test fails when it is missing).
inline Device& opencl_device(int i) {
  Device* d = Registry::instance().find("OpenCL" + std::to_string(i));
  if (d == nullptr) {
    const char* env = std::getenv("POCL_DEVICES");
    ADD_FAILURE() << "OpenCL" << i << " is not registered (POCL_DEVICES=" << (env != nullptr ? env : "")
                  << ")";
    throw std::runtime_error("no OpenCL device");
  }
  return *d;
}

// Places every tensor of ctx that has no memory in one new buffer of `type`, then resolves views.
inline std::unique_ptr<Buffer> allocate_all(BufferType& type, Context& ctx) {
  const size_t align = type.alignment();
  auto padded = [&](const Tensor& t) { return (type.alloc_size(t) + align - 1) / align * align; };
  size_t total = 0;
  for (auto& t : ctx.tensors())
    if (t.view_src == nullptr && t.data == nullptr) total += padded(t);
  auto buffer = type.allocate(std::max<size_t>(total, 1));
  size_t offset = 0;
  for (auto& t : ctx.tensors()) {
    if (t.view_src != nullptr || t.data != nullptr) continue;
    buffer->place(t, offset);
    offset += padded(t);
  }
  for (auto& t : ctx.tensors())
    if (t.view_src != nullptr) resolve_view_data(t);
  return buffer;
}

// The ggml byte image of a contiguous tensor of `type` holding values uniform in [-1, 1]
// (integers in [-50, 50] for I32).
inline std::vector<uint8_t> random_image(DType type, const std::array<int64_t, 4>& ne, std::mt19937& rng) {
  const int64_t n = ne[0] * ne[1] * ne[2] * ne[3];
  std::vector<uint8_t> out(row_bytes(type, ne[0]) * static_cast<size_t>(n / ne[0]));
  if (type == DType::I32) {
    std::uniform_int_distribution<int32_t> dist(-50, 50);
    for (int64_t i = 0; i < n; ++i) {
      const int32_t v = dist(rng);
      std::memcpy(out.data() + 4 * i, &v, 4);
    }
    return out;
  }
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(ne[0]));
  const size_t rb = row_bytes(type, ne[0]);
  for (int64_t r = 0; r < n / ne[0]; ++r) {
    for (auto& v : row) v = dist(rng);
    from_f32_row(type, row.data(), out.data() + static_cast<size_t>(r) * rb, ne[0]);
  }
  return out;
}

// Whole byte image of a tensor (through its buffer, or host memory).
inline std::vector<uint8_t> read_image(const Tensor& t) {
  std::vector<uint8_t> v(t.nbytes());
  tensor_get(t, v.data(), 0, v.size());
  return v;
}

}  // namespace tessera::test
