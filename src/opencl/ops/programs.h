#pragma once
// Kernel programs that bundle several families' kernels/<family>.cl files: PoCL runs one LLVM build
// per program, so families that usually run together share one.
#include <string_view>

namespace tessera::opencl {

// binary.cl + unary.cl: ADD, MUL, DIV, ACC, UNARY, LEAKY_RELU, SCALE, SQR, CLAMP.
inline constexpr std::string_view kElementwiseProgram = "binary+unary";
// shape.cl + resample.cl + conv.cl + reduce.cl: REPEAT, CONCAT, UPSCALE, PAD, ARANGE,
// TIMESTEP_EMBEDDING, IM2COL, POOL_2D, SUM_ROWS, ARGSORT.
inline constexpr std::string_view kLayoutProgram = "shape+resample+conv+reduce";

}  // namespace tessera::opencl
