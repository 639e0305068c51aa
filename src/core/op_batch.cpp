#include "tessera/op_batch.h"

namespace tessera {

int64_t op_batch_size(const Tensor& node) noexcept {
  switch (node.op) {
    case Op::None:
    case Op::Reshape:
    case Op::View:
    case Op::Permute:
    case Op::Transpose:
    case Op::GetRows:
    case Op::Dup:
    case Op::Cont:
    case Op::Cpy:
      return 0;
    case Op::MulMat:
      return node.src[1] != nullptr ? node.src[1]->ne[1] : 0;
    case Op::MulMatId:  // [n_ff, experts used, tokens]
      return node.ne[2];
    case Op::Rope:
    case Op::FlashAttnExt:  // [D_v, heads, queries, B]
      return node.ne[2];
    case Op::Im2Col:
      return node.nrows();
    default:
      return node.ne[1];
  }
}

}  // namespace tessera
