#include "cuda/oplib.h"

namespace tessera::cuda {

std::shared_ptr<const device::OpLibrary> make_op_library() {
  // No entries: OpLibrary::supports() is false for every op; weights keep ggml's bytes.
  return std::make_shared<device::OpLibrary>();
}

}  // namespace tessera::cuda
