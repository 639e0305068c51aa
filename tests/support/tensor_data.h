#pragma once
// Test helpers for host tensors: read and write elements through their strides in logical order,
// make deterministic inputs, run a graph on a chosen CPU configuration, and check that every
// configuration gives the same bytes and that builders reject bad input with a clear Error.
// Element access is written here from the formats (not through the kernels' own element code), so
// the tests stay an independent check.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tessera/convert.h"
#include "tessera/cpu.h"
#include "tessera/dtype.h"
#include "tessera/error.h"
#include "tessera/graph.h"
#include "tessera/quant.h"
#include "tessera/tensor.h"

namespace tessera::test {

// Address of element (i0..i3) through t's strides (for a quantized type, i0 counts blocks).
inline char* elem_ptr(const Tensor& t, int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) {
  return static_cast<char*>(t.data) + i0 * t.nb[0] + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}

// One element of a non-quantized tensor as f32 (f16/bf16 widened exactly, i32 converted).
inline float get(const Tensor& t, int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) {
  const char* p = elem_ptr(t, i0, i1, i2, i3);
  switch (t.type) {
    case DType::F32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::F16:
    case DType::BF16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return t.type == DType::F16 ? fp16_to_fp32(v) : bf16_to_fp32(v);
    }
    case DType::I32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return static_cast<float>(v);
    }
    default:
      ADD_FAILURE() << "get() on a quantized tensor";
      return 0.0f;
  }
}

inline int32_t get_i32(const Tensor& t, int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) {
  int32_t v;
  std::memcpy(&v, elem_ptr(t, i0, i1, i2, i3), 4);
  return v;
}

// Stores v into one element of a non-quantized tensor (rounded to nearest even for f16/bf16,
// truncated for i32).
inline void set(const Tensor& t, float v, int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) {
  char* p = elem_ptr(t, i0, i1, i2, i3);
  switch (t.type) {
    case DType::F32:
      std::memcpy(p, &v, 4);
      break;
    case DType::F16: {
      const uint16_t h = fp32_to_fp16(v);
      std::memcpy(p, &h, 2);
      break;
    }
    case DType::BF16: {
      const uint16_t h = fp32_to_bf16(v);
      std::memcpy(p, &h, 2);
      break;
    }
    case DType::I32: {
      const int32_t i = static_cast<int32_t>(v);
      std::memcpy(p, &i, 4);
      break;
    }
    default:
      ADD_FAILURE() << "set() on a quantized tensor";
  }
}

inline void set_i32(const Tensor& t, int32_t v, int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) {
  std::memcpy(elem_ptr(t, i0, i1, i2, i3), &v, 4);
}

// Calls fn(i0, i1, i2, i3, k) over t's shape in logical row-major order, k counting from 0.
inline void for_each(const Tensor& t,
                     const std::function<void(int64_t, int64_t, int64_t, int64_t, size_t)>& fn) {
  size_t k = 0;
  for (int64_t i3 = 0; i3 < t.ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < t.ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < t.ne[1]; ++i1)
        for (int64_t i0 = 0; i0 < t.ne[0]; ++i0) fn(i0, i1, i2, i3, k++);
}

// Writes values in logical row-major order through t's strides. A quantized tensor (rows must be
// contiguous) is quantized row by row, as files store it; the grid I-quants, which nothing writes
// from floats, get random blocks of the row's magnitude instead (random_blocks, seeded by the row's
// values), so callers take what the tensor holds from to_f32_row.
inline void fill(const Tensor* t, const std::vector<float>& values) {
  ASSERT_EQ(static_cast<int64_t>(values.size()), t->nelements());
  if (is_quantized(t->type)) {
    ASSERT_TRUE(t->rows_contiguous()) << "fill() on a quantized tensor with strided blocks";
    size_t k = 0;
    for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
      for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
        for (int64_t i1 = 0; i1 < t->ne[1]; ++i1, k += static_cast<size_t>(t->ne[0])) {
          if (!is_grid_iquant(t->type)) {
            from_f32_row(t->type, values.data() + k, elem_ptr(*t, 0, i1, i2, i3), t->ne[0]);
            continue;
          }
          float amax = 0.0f;
          uint64_t seed = k;
          for (int64_t i = 0; i < t->ne[0]; ++i) {
            const float v = values[k + static_cast<size_t>(i)];
            amax = std::max(amax, std::fabs(v));
            uint32_t bits;
            std::memcpy(&bits, &v, 4);
            seed = seed * 0x100000001b3ull ^ bits;
          }
          random_blocks(t->type, seed, amax, elem_ptr(*t, 0, i1, i2, i3), t->ne[0]);
        }
    return;
  }
  for_each(*t, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3, size_t k) {
    set(*t, values[k], i0, i1, i2, i3);
  });
}

inline void fill_i32(const Tensor* t, const std::vector<int32_t>& values) {
  ASSERT_EQ(static_cast<int64_t>(values.size()), t->nelements());
  for_each(*t, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3, size_t k) {
    set_i32(*t, values[k], i0, i1, i2, i3);
  });
}

// All elements in logical row-major order as f32 (non-quantized types).
inline std::vector<float> values(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.nelements()));
  for_each(
      t, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3, size_t k) { out[k] = get(t, i0, i1, i2, i3); });
  return out;
}

inline std::vector<int32_t> values_i32(const Tensor& t) {
  std::vector<int32_t> out(static_cast<size_t>(t.nelements()));
  for_each(t, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3, size_t k) {
    out[k] = get_i32(t, i0, i1, i2, i3);
  });
  return out;
}

// n values uniform in [lo, hi) from mt19937(seed): the same stream for the same seed everywhere.
inline std::vector<float> random_values(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

// Fills t (in logical order) with random_values(nelements, seed, lo, hi).
inline void fill_random(const Tensor* t, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  fill(t, random_values(t->nelements(), seed, lo, hi));
}

// start, start + 1, start + 2, ... (n values).
inline std::vector<float> iota(int64_t n, float start = 0.0f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<float>(i);
  return v;
}

// Computes the graph of `out` on the CPU backend with n_threads threads and the given kernels.
inline void compute(Tensor* out, int n_threads = 1, cpu::KernelSet kernels = cpu::KernelSet::Reference) {
  Graph g{out};
  cpu::CpuBackend backend(n_threads, kernels, cpu::ThreadLimit::Exact);  // 3 threads even on 2 cores
  backend.set_min_parallel_bytes(0);  // small test tensors are split across the threads too
  backend.compute(g);
}

inline std::vector<uint8_t> raw_bytes(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.data);
  return std::vector<uint8_t>(p, p + t.nbytes());
}

struct Config {
  int threads;
  cpu::KernelSet kernels;
};
inline constexpr Config kConfigs[] = {{1, cpu::KernelSet::Reference},
                                      {2, cpu::KernelSet::Reference},
                                      {3, cpu::KernelSet::Reference},
                                      {1, cpu::KernelSet::Fast},
                                      {2, cpu::KernelSet::Fast}};

// Computes out under every configuration (threads x kernel sets); the bytes of `storage` (out
// itself by default; the destination for CPY) must come out identical every time.
inline void expect_same_bytes_everywhere(Tensor* out, const Tensor* storage = nullptr) {
  const Tensor& s = storage != nullptr ? *storage : *out;
  std::vector<uint8_t> first;
  for (const Config& c : kConfigs) {
    std::memset(s.data, 0xA5, s.nbytes());
    compute(out, c.threads, c.kernels);
    if (first.empty()) {
      first = raw_bytes(s);
      continue;
    }
    EXPECT_EQ(first, raw_bytes(s)) << c.threads << " threads, "
                                   << (c.kernels == cpu::KernelSet::Fast ? "fast" : "reference")
                                   << " kernels differ from 1 thread, reference";
  }
}

// The raw bytes of out after computing with 1 and with 2 threads (reference kernels) must be identical.
inline void expect_thread_independent(Tensor* out) {
  compute(out, 1);
  const std::vector<uint8_t> one = raw_bytes(*out);
  std::memset(out->data, 0x5a, out->nbytes());
  compute(out, 2);
  EXPECT_EQ(0, std::memcmp(one.data(), out->data, one.size())) << "1 vs 2 threads differ";
}

// fn must throw tessera::Error (InvalidArgument) whose message begins with "<op>:".
inline void expect_op_error(const std::function<void()>& fn, const std::string& op) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown, expected one from " << op;
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(op + ":", 0), 0u) << e.what();
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  }
}

// fn must throw tessera::Error (InvalidArgument) whose message contains `op`.
inline void expect_error(const std::function<void()>& fn, const std::string& op) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown, expected one naming " << op;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(op), std::string::npos) << e.what();
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << e.what();
  }
}

}  // namespace tessera::test
