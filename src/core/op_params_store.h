#pragma once
// Core-internal: how the op builders (ops.cpp) store typed parameters into a node. The packing into
// Tensor::params lives only in op_params.cpp; nothing outside core writes or reads raw params.
// One user outside core: the CPU's FLASH_ATTN_EXT, which runs other ops' kernels on descriptors it
// makes on the stack (no Context, no builder) and gives them their typed parameters here.
#include "tessera/op_params.h"

namespace tessera::detail {

void store_params(Tensor& node, const PermuteAxes& p);
void store_params(Tensor& node, const ConcatParams& p);
void store_params(Tensor& node, const AccParams& p);
void store_params(Tensor& node, UnaryOp op);
void store_params(Tensor& node, const LeakyReluParams& p);
void store_params(Tensor& node, const ScaleParams& p);
void store_params(Tensor& node, const ClampParams& p);
void store_params(Tensor& node, const GluParams& p);
void store_params(Tensor& node, const NormParams& p);
void store_params(Tensor& node, const GroupNormParams& p);
void store_params(Tensor& node, const UpscaleParams& p);
void store_params(Tensor& node, const PadParams& p);
void store_params(Tensor& node, const ArangeParams& p);
void store_params(Tensor& node, const TimestepEmbeddingParams& p);
void store_params(Tensor& node, const DiagMaskInfParams& p);
void store_params(Tensor& node, const SoftMaxParams& p);
void store_params(Tensor& node, const RopeParams& p);
void store_params(Tensor& node, const FlashAttnParams& p);
void store_params(Tensor& node, const Im2ColParams& p);
void store_params(Tensor& node, const Pool2DParams& p);
void store_params(Tensor& node, SortOrder order);

}  // namespace tessera::detail
