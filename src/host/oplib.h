#pragma once
// The host runtime's op library: every op the CPU backend computes, run with the CPU kernels on
// the stream's worker thread, directly on device memory (host pointers). Weights stay in ggml's
// native blocks (no split layout, no slack), which is what those kernels read.
#include <memory>

#include "device/oplib.h"

namespace tessera::host {
std::shared_ptr<const device::OpLibrary> make_op_library();
}
