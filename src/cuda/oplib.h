#pragma once
// The CUDA op library. For now it computes no op: every node reports unsupported, so the
// scheduler keeps graphs on the CPU and a CUDA device holds memory, streams and copies only.
// Kernels (CUDA C compiled by NVRTC, cuBLAS for MUL_MAT) come next (docs/GPU.md).
#include <memory>

#include "device/oplib.h"

namespace tessera::cuda {
std::shared_ptr<const device::OpLibrary> make_op_library();
}
