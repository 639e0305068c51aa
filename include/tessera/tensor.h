#pragma once
// Tensor descriptors: type, shape (ne), byte strides (nb), the op that makes them, where the data lives.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "tessera/dtype.h"

namespace tessera {

inline constexpr int kMaxDims = 4;
inline constexpr int kMaxSources = 5;
inline constexpr int kMaxOpParams = 16;

enum class Op : uint8_t {
  None,  // a leaf: input or weight
  // metadata only (views)
  Reshape,
  View,
  Permute,
  Transpose,
  // copying and shape
  Dup,
  Cont,
  Cpy,
  Repeat,
  GetRows,
  Concat,
  // elementwise
  Add,
  Mul,
  Div,
  Acc,
  AddId,
  Unary,
  LeakyRelu,
  Scale,
  Sqr,
  Clamp,
  Glu,
  // norms
  Norm,
  RmsNorm,
  GroupNorm,
  // resampling, padding, generators
  Upscale,
  Pad,
  Arange,
  TimestepEmbedding,
  // matmul, masking, softmax, rope
  MulMat,
  MulMatId,
  DiagMaskInf,
  SoftMax,
  Rope,
  FlashAttnExt,
  // convolution, pooling, reductions, sorting
  Im2Col,
  Pool2D,
  SumRows,
  Argsort,
  Count_
};
inline constexpr int kOpCount = static_cast<int>(Op::Count_);

// Upper-case name as ggml prints it ("MUL_MAT", "SOFT_MAX", ...).
std::string_view op_name(Op op) noexcept;
// True for ops that only describe a view of their source (no kernel runs).
bool is_view_op(Op op) noexcept;

enum class UnaryOp : int32_t { Gelu, GeluQuick, Silu, Tanh, Relu, HardSigmoid, HardSwish, Count_ };
inline constexpr int kUnaryOpCount = static_cast<int>(UnaryOp::Count_);
std::string_view unary_op_name(UnaryOp op) noexcept;

// GLU variants (ggml's ggml_glu_op values). Only gpt-oss's clamped SwiGLU so far.
enum class GluOp : int32_t { SwigluOai = 3 };

enum class RopeMode : int32_t { Normal = 0, Neox = 2 };
enum class SortOrder : int32_t { Ascending = 0, Descending = 1 };
enum class PoolOp : int32_t { Max = 0, Avg = 1 };

enum TensorFlag : uint32_t {
  kFlagInput = 1u << 0,   // filled by the caller before compute
  kFlagOutput = 1u << 1,  // read by the caller after compute: never overwritten by the allocator
  kFlagWeight = 1u << 2,  // a model parameter (placement hint for the scheduler)
};

class Buffer;

struct Tensor {
  DType type = DType::F32;
  std::array<int64_t, kMaxDims> ne{1, 1, 1, 1};  // elements per dim, ne[0] innermost
  std::array<size_t, kMaxDims> nb{};             // byte stride per dim (nb[0] = block bytes)

  Op op = Op::None;
  std::array<int32_t, kMaxOpParams> params{};  // packed by core only: read them with tessera/op_params.h
  std::array<Tensor*, kMaxSources> src{};

  Tensor* view_src = nullptr;  // the tensor whose memory a view shares
  size_t view_offset = 0;      // byte offset into view_src

  void* data = nullptr;      // host address or opaque device address
  Buffer* buffer = nullptr;  // owning buffer (nullptr until allocated)
  uint32_t flags = 0;
  std::string name;

  int64_t nelements() const noexcept { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t nrows() const noexcept { return ne[1] * ne[2] * ne[3]; }
  // Bytes spanned from the first to one past the last element (ggml_nbytes).
  size_t nbytes() const noexcept;
  // Bytes of one contiguous row.
  size_t row_size() const noexcept { return row_bytes(type, ne[0]); }
  int n_dims() const noexcept;  // 1..4: highest dim with ne > 1, at least 1

  bool is_contiguous() const noexcept;
  bool rows_contiguous() const noexcept { return nb[0] == traits(type).block_bytes; }
  bool is_view() const noexcept { return view_src != nullptr; }
  bool same_shape(const Tensor& other) const noexcept { return ne == other.ne; }

  // Address of element (i0 must be a block start for quantized types); host data only.
  char* at(int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) const noexcept {
    return static_cast<char*>(data) + (i0 / traits(type).block_size) * nb[0] + i1 * nb[1] + i2 * nb[2] +
           i3 * nb[3];
  }

  // "name (f32 [4, 3, 1, 1])" for error messages.
  std::string describe() const;
  std::string shape_string() const;  // "[4, 3, 1, 1]"
};

// Contiguous strides for a type and shape.
std::array<size_t, kMaxDims> contiguous_strides(DType type, const std::array<int64_t, kMaxDims>& ne);

}  // namespace tessera
