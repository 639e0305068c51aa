#pragma once
// Small helpers for the CPU reference-kernel tests: fill and read tensors in logical order,
// run a graph on the reference backend, and check builder errors.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "cpu/element.h"
#include "tessera/cpu.h"
#include "tessera/error.h"
#include "tessera/graph.h"
#include "tessera/tensor.h"

namespace tessera::test {

inline int64_t flat_index(const Tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return ((i3 * t.ne[2] + i2) * t.ne[1] + i1) * t.ne[0] + i0;
}

inline const char* elem_ptr(const Tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return static_cast<const char*>(t.data) + i0 * t.nb[0] + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}

// Element (i0..i3) of a non-quantized tensor, through its strides.
inline float elem(const Tensor& t, int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) {
  return cpu::load_f32(t.type, elem_ptr(t, i0, i1, i2, i3));
}

inline int32_t elem_i32(const Tensor& t, int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) {
  int32_t v;
  std::memcpy(&v, elem_ptr(t, i0, i1, i2, i3), sizeof v);
  return v;
}

// Writes values (logical row-major order) into t through its strides; F32, F16 or I32.
inline void fill(Tensor* t, const std::vector<float>& values) {
  ASSERT_EQ(static_cast<int64_t>(values.size()), t->nelements());
  for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < t->ne[1]; ++i1)
        for (int64_t i0 = 0; i0 < t->ne[0]; ++i0)
          cpu::store_f32(t->type, const_cast<char*>(elem_ptr(*t, i0, i1, i2, i3)),
                         values[static_cast<size_t>(flat_index(*t, i0, i1, i2, i3))]);
}

inline void fill_i32(Tensor* t, const std::vector<int32_t>& values) {
  ASSERT_EQ(static_cast<int64_t>(values.size()), t->nelements());
  for (int64_t i = 0; i < t->ne[0]; ++i)
    std::memcpy(const_cast<char*>(elem_ptr(*t, i, 0, 0, 0)), &values[static_cast<size_t>(i)], 4);
}

// All elements in logical row-major order, as f32.
inline std::vector<float> values(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.nelements()));
  for (int64_t i3 = 0; i3 < t.ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < t.ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < t.ne[1]; ++i1)
        for (int64_t i0 = 0; i0 < t.ne[0]; ++i0)
          out[static_cast<size_t>(flat_index(t, i0, i1, i2, i3))] = elem(t, i0, i1, i2, i3);
  return out;
}

inline std::vector<float> random_values(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

// Computes the graph of `out` on the reference CPU backend.
inline void compute(Tensor* out, int n_threads = 1) {
  Graph g{out};
  cpu::CpuBackend backend(n_threads, cpu::KernelSet::Reference);
  backend.compute(g);
}

// The raw bytes of out after computing with 1 and with 2 threads must be identical.
inline void expect_thread_independent(Tensor* out) {
  compute(out, 1);
  const size_t bytes = out->nbytes();
  std::vector<char> one(static_cast<const char*>(out->data), static_cast<const char*>(out->data) + bytes);
  std::memset(out->data, 0x5a, bytes);
  compute(out, 2);
  EXPECT_EQ(0, std::memcmp(one.data(), out->data, bytes)) << "1 vs 2 threads differ";
}

// fn must throw tessera::Error whose message begins with "<op>:".
inline void expect_op_error(const std::function<void()>& fn, const std::string& op) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown, expected one from " << op;
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(op + ":", 0), 0u) << e.what();
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  }
}

}  // namespace tessera::test
