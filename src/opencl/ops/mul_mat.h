#pragma once
// Which of MUL_MAT's two OpenCL paths ran (ops/mul_mat.cpp), so tests can tell them apart.
#include <cstdint>

namespace tessera::opencl {

struct MulMatPathCounts {
  uint64_t matrix_vector = 0;  // nodes computed by the matrix-vector kernels
  uint64_t gemm = 0;           // nodes computed by CLBlast SGEMM
};
// Counts since the process started, over every OpenCL device.
MulMatPathCounts mul_mat_path_counts() noexcept;
// True when Tessera was built with CLBlast (else every MUL_MAT takes the matrix-vector path).
bool mul_mat_has_gemm() noexcept;

}  // namespace tessera::opencl
