#pragma once
// The OpenCL op library: one register_<family>() per src/opencl/ops/<family>.cpp (with its
// kernels in src/opencl/kernels/<family>.cl), and the helpers every family uses to pass tensors
// to kernels and launch them.
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "device/oplib.h"
#include "device/split_layout.h"
#include "opencl/cl.h"
#include "opencl/runtime.h"

namespace tessera::opencl {

// Every op this library computes (the device-independent table).
std::shared_ptr<const device::OpLibrary> make_op_library();
// What the kernels read: Q4_0 and Q8_0 in the split layout, every other block type in ggml's
// native blocks, rows padded to 512 elements of slack.
const device::SplitLayout& weight_layout();
// The quantized types the kernels decode (load_chunk in kernels/common.cl): all of them.
bool decodes_blocks(DType type) noexcept;
// The quantized types the kernels can write from f32 (CPY into them): Q4_0, Q8_0, Q4_1, Q5_0, Q5_1,
// IQ4_NL (the 32-element types but MXFP4, whose exponent needs libm's log2f; the super-block types'
// quantizers search and stay on the CPU).
bool encodes_blocks(DType type) noexcept;

// ---- families (one file each) ----
void register_views(device::OpLibrary& lib);     // NONE, RESHAPE, VIEW, PERMUTE, TRANSPOSE (oplib.cpp)
void register_copy(device::OpLibrary& lib);      // DUP, CONT, CPY      (ops/copy.cpp)
void register_get_rows(device::OpLibrary& lib);  // GET_ROWS           (ops/get_rows.cpp)
void register_binary(device::OpLibrary& lib);    // ADD, MUL, DIV, ACC (ops/binary.cpp)
void register_unary(device::OpLibrary& lib);     // UNARY, LEAKY_RELU, SCALE, SQR, CLAMP (ops/unary.cpp)
void register_shape(device::OpLibrary& lib);     // REPEAT, CONCAT (ops/shape.cpp)
void register_resample(
    device::OpLibrary& lib);                    // UPSCALE, PAD, ARANGE, TIMESTEP_EMBEDDING (ops/resample.cpp)
void register_conv(device::OpLibrary& lib);     // IM2COL, POOL_2D (ops/conv.cpp)
void register_reduce(device::OpLibrary& lib);   // SUM_ROWS, ARGSORT (ops/reduce.cpp)
void register_norm(device::OpLibrary& lib);     // NORM, RMS_NORM, GROUP_NORM (ops/norm.cpp)
void register_softmax(device::OpLibrary& lib);  // SOFT_MAX, DIAG_MASK_INF (ops/softmax.cpp)
void register_rope(device::OpLibrary& lib);     // ROPE               (ops/rope.cpp)
void register_mul_mat(device::OpLibrary& lib);  // MUL_MAT, MUL_MAT_ID (ops/mul_mat.cpp)
void register_add_id(device::OpLibrary& lib);   // ADD_ID             (ops/add_id.cpp)
void register_glu(device::OpLibrary& lib);      // GLU (SWIGLU_OAI)   (ops/glu.cpp)
// Batch width from which MUL_MAT takes the GEMM path, for every weight type; TESSERA_OPENCL_GEMM_MIN_N
// (read once) sets it, and this overrides both (nullopt: back to the environment or the defaults).
void set_gemm_min_columns(std::optional<int64_t> columns);

// ---- helpers ----
// A tensor as kernel arguments: its buffer, the byte offset of its first element (or first quant
// of the device layout), the byte offset of its first scale (device layouts only), shape, strides.
struct TensorArg {
  cl_mem mem = nullptr;
  cl_ulong offset = 0;
  cl_ulong scale_offset = 0;
  cl_int type = 0;
  cl_long4 ne{};
  cl_ulong4 nb{};
};
TensorArg tensor_arg(const device::OpContext& ctx, const Tensor& t);
// A device address (e.g. scratch) as (buffer, offset).
ClAddress address_arg(const device::OpContext& ctx, const void* ptr, size_t size);

OpenClRuntime& runtime_of(const device::OpContext& ctx);
cl_kernel kernel_of(const device::OpContext& ctx, std::string_view program, std::string_view name);

// Sets kernel arguments 0, 1, 2, ... in order (any trivially copyable values, cl_mem included).
template <typename... Args>
void set_args(const device::OpContext& ctx, cl_kernel k, const Args&... args) {
  cl_uint i = 0;
  cl_int err = CL_SUCCESS;
  ((err == CL_SUCCESS ? (err = clSetKernelArg(k, i++, sizeof(Args), &args)) : err), ...);
  if (err != CL_SUCCESS) check(err, runtime_of(ctx).properties(ctx.device).name, "clSetKernelArg");
}

// Enqueues k over `global` work-items (dim 0 is rounded up to the work-group size: kernels check it).
void launch(const device::OpContext& ctx, cl_kernel k, std::array<size_t, 3> global);

}  // namespace tessera::opencl
