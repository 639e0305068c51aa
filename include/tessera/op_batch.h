#pragma once
// An op's batch size: how many independent items (tokens, in a model) one node processes at once.
// A device weighs it against the cost of copying the node's inputs in (Backend::wants_offload).
#include <cstdint>

#include "tessera/tensor.h"

namespace tessera {

// Per op family (model activations are [features, tokens]; per-head ones [head_dim, heads, tokens]):
//   MUL_MAT         b's ne[1]: the columns each matrix of a multiplies (tokens).
//   ROPE            ne[2]: positions (tokens); ne[1] counts heads.
//   FLASH_ATTN_EXT  ne[2]: query rows (tokens); its result is [D_v, heads, queries, B].
//   IM2COL          ne[1] * ne[2] * ne[3]: the patch rows, i.e. the columns of the GEMM it feeds.
//   GET_ROWS        0: a gather reads each selected row once, so copying its table never pays.
//   DUP, CONT, CPY  0: a copy only moves bytes; moving its input to a device costs as much. (Their
//                   layouts are often per-head, e.g. merging attention heads, where ne[1] is heads.)
//   leafs, views    0: nothing is computed.
//   everything else ne[1]: rows of a [features, tokens] activation (SOFT_MAX and DIAG_MASK_INF:
//                   query rows, ne[2] counts heads). For an elementwise op on a per-head layout this
//                   counts heads too; the scheduler asks only about nodes reading weights in host
//                   memory, and no such node of the llama graphs has that layout.
int64_t op_batch_size(const Tensor& node) noexcept;

}  // namespace tessera
