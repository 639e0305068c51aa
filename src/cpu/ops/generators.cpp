// TEMPORARY placeholder until the family is implemented.
#include "core/check.h"
#include "cpu/kernels.h"
namespace tessera::cpu {
void run_generator(const ComputeContext&, Tensor& dst) {
  raise(ErrorCode::Unsupported, "CPU: {} not implemented yet", op_name(dst.op));
}
}  // namespace tessera::cpu
