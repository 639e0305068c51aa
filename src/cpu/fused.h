#pragma once
// Fused CPU kernels: one kernel call for a chain of nodes, bit-identical to running the nodes one
// after another. Op libraries that prepare whole splits (the host runtime's) use them; each
// can_fuse_* says whether a chain qualifies.
#include "cpu/kernels.h"

namespace tessera::cpu {

// mul = MUL(RMS_NORM(x), w), all F32, w's rows contiguous (tiled over mul as MUL tiles it).
bool can_fuse_rms_norm_mul(const Tensor& norm, const Tensor& mul) noexcept;
// Writes mul's result without writing norm's: per row the RMS_NORM scale, then (x * scale) * w,
// each product rounded to f32 as the two ops round them.
void run_rms_norm_mul(const ComputeContext& ctx, const Tensor& norm, Tensor& mul);

}  // namespace tessera::cpu
