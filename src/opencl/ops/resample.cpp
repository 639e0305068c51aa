// UPSCALE (nearest; bilinear with or without align-corners), PAD (zero or circular), ARANGE and
// TIMESTEP_EMBEDDING on OpenCL (kernels/resample.cl). F32, any source strides.
#include <cmath>

#include "core/check.h"
#include "opencl/oplib.h"
#include "opencl/ops/programs.h"
#include "tessera/op_params.h"

namespace tessera::opencl {
namespace {

bool supports_upscale(const Tensor& node) {
  const Tensor* a = node.src[0];
  return a != nullptr && a->type == DType::F32 && node.type == DType::F32 && a->nelements() > 0;
}

void run_upscale(const device::OpContext& ctx, Tensor& node) {
  const Tensor& a = *node.src[0];
  const TensorArg ta = tensor_arg(ctx, a);
  const TensorArg td = tensor_arg(ctx, node);
  // The f32 scale factors, computed as the CPU computes them (the index rounding depends on them).
  cl_float4 sf;
  for (int d = 0; d < 4; ++d)
    sf.s[d] = static_cast<float>(node.ne[static_cast<size_t>(d)]) /
              static_cast<float>(a.ne[static_cast<size_t>(d)]);
  const cl_long n = node.nelements();
  const UpscaleParams params = upscale_params(node);
  const cl_int bilinear = params.mode == UpscaleMode::Bilinear ? 1 : 0;
  const cl_int align_corners = params.align_corners ? 1 : 0;
  cl_kernel k = kernel_of(ctx, kLayoutProgram, "upscale_op");
  set_args(ctx, k, ta.mem, ta.offset, ta.ne, ta.nb, td.mem, td.offset, td.ne, td.nb, sf, n, bilinear,
           align_corners);
  launch(ctx, k, {static_cast<size_t>(n), 1, 1});
}

bool supports_pad(const Tensor& node) {
  const Tensor* a = node.src[0];
  return a != nullptr && a->type == DType::F32 && node.type == DType::F32;
}

void run_pad(const device::OpContext& ctx, Tensor& node) {
  const Tensor& a = *node.src[0];
  if (a.nelements() == 0) {  // nothing to copy: all padding
    ctx.runtime->fill_async(*ctx.stream, node.data, 0, node.nbytes());
    return;
  }
  const TensorArg ta = tensor_arg(ctx, a);
  const TensorArg td = tensor_arg(ctx, node);
  const PadParams params = pad_params(node);
  const cl_long4 lp{{params.left[0], params.left[1], params.left[2], params.left[3]}};
  const cl_long n = node.nelements();
  const cl_int circular = params.circular ? 1 : 0;
  cl_kernel k = kernel_of(ctx, kLayoutProgram, "pad_op");
  set_args(ctx, k, ta.mem, ta.offset, ta.ne, ta.nb, td.mem, td.offset, td.ne, td.nb, lp, n, circular);
  launch(ctx, k, {static_cast<size_t>(n), 1, 1});
}

bool supports_arange(const Tensor& node) { return node.type == DType::F32 && node.is_contiguous(); }

void run_arange(const device::OpContext& ctx, Tensor& node) {
  const TensorArg td = tensor_arg(ctx, node);
  const ArangeParams params = arange_params(node);
  const cl_float start = params.start, step = params.step;
  const cl_long n = node.nelements();
  cl_kernel k = kernel_of(ctx, kLayoutProgram, "arange_op");
  set_args(ctx, k, td.mem, td.offset, start, step, n);
  launch(ctx, k, {static_cast<size_t>(n), 1, 1});
}

bool supports_timestep_embedding(const Tensor& node) {
  const Tensor* t = node.src[0];
  return t != nullptr && t->type == DType::F32 && node.type == DType::F32 && node.rows_contiguous();
}

void run_timestep_embedding(const device::OpContext& ctx, Tensor& node) {
  const Tensor& t = *node.src[0];
  const TensorArg tt = tensor_arg(ctx, t);
  const TensorArg td = tensor_arg(ctx, node);
  const TimestepEmbeddingParams params = timestep_embedding_params(node);
  const cl_int dim = params.dim;
  // -log(max_period) in f32, as the CPU computes it.
  const cl_float neg_log_period = -std::log(static_cast<float>(params.max_period));
  const cl_long n = node.nelements();
  cl_kernel k = kernel_of(ctx, kLayoutProgram, "timestep_embedding_op");
  set_args(ctx, k, tt.mem, tt.offset, tt.nb.s[0], td.mem, td.offset, td.nb.s[1], dim, neg_log_period, n);
  launch(ctx, k, {static_cast<size_t>(n), 1, 1});
}

}  // namespace

void register_resample(device::OpLibrary& lib) {
  lib.set(Op::Upscale, {&supports_upscale, &run_upscale});
  lib.set(Op::Pad, {&supports_pad, &run_pad});
  lib.set(Op::Arange, {&supports_arange, &run_arange});
  lib.set(Op::TimestepEmbedding, {&supports_timestep_embedding, &run_timestep_embedding});
}

}  // namespace tessera::opencl
