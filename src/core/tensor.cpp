#include "tessera/tensor.h"

#include <fmt/format.h>

namespace tessera {
namespace {

constexpr std::string_view kOpNames[kOpCount] = {
    "NONE",
    "RESHAPE",
    "VIEW",
    "PERMUTE",
    "TRANSPOSE",
    "DUP",
    "CONT",
    "CPY",
    "REPEAT",
    "GET_ROWS",
    "CONCAT",
    "ADD",
    "MUL",
    "DIV",
    "ACC",
    "ADD_ID",
    "UNARY",
    "LEAKY_RELU",
    "SCALE",
    "SQR",
    "CLAMP",
    "GLU",
    "NORM",
    "RMS_NORM",
    "GROUP_NORM",
    "UPSCALE",
    "PAD",
    "ARANGE",
    "TIMESTEP_EMBEDDING",
    "MUL_MAT",
    "MUL_MAT_ID",
    "DIAG_MASK_INF",
    "SOFT_MAX",
    "ROPE",
    "FLASH_ATTN_EXT",
    "IM2COL",
    "POOL_2D",
    "SUM_ROWS",
    "ARGSORT",
};

constexpr std::string_view kUnaryNames[kUnaryOpCount] = {"GELU", "GELU_QUICK",  "SILU",     "TANH",
                                                         "RELU", "HARDSIGMOID", "HARDSWISH"};

}  // namespace

std::string_view op_name(Op op) noexcept {
  const int i = static_cast<int>(op);
  return i >= 0 && i < kOpCount ? kOpNames[i] : "?";
}

bool is_view_op(Op op) noexcept {
  return op == Op::Reshape || op == Op::View || op == Op::Permute || op == Op::Transpose;
}

std::string_view unary_op_name(UnaryOp op) noexcept {
  const int i = static_cast<int>(op);
  return i >= 0 && i < kUnaryOpCount ? kUnaryNames[i] : "?";
}

size_t Tensor::nbytes() const noexcept {
  for (int d = 0; d < kMaxDims; ++d)
    if (ne[d] <= 0) return 0;
  const int64_t bs = traits(type).block_size;
  size_t bytes;
  if (bs == 1) {
    bytes = traits(type).block_bytes;
    for (int d = 0; d < kMaxDims; ++d) bytes += static_cast<size_t>(ne[d] - 1) * nb[d];
  } else {
    bytes = static_cast<size_t>(ne[0] / bs) * nb[0];
    for (int d = 1; d < kMaxDims; ++d) bytes += static_cast<size_t>(ne[d] - 1) * nb[d];
  }
  return bytes;
}

int Tensor::n_dims() const noexcept {
  for (int d = kMaxDims - 1; d >= 1; --d)
    if (ne[d] > 1) return d + 1;
  return 1;
}

bool Tensor::is_contiguous() const noexcept {
  const auto expected = contiguous_strides(type, ne);
  // Strides of dims with a single element do not matter.
  for (int d = 0; d < kMaxDims; ++d)
    if (ne[d] > 1 && nb[d] != expected[d]) return false;
  return true;
}

std::string Tensor::shape_string() const {
  return fmt::format("[{}, {}, {}, {}]", ne[0], ne[1], ne[2], ne[3]);
}

std::string Tensor::describe() const {
  return fmt::format("{}({} {})", name.empty() ? std::string("tensor") : name, tessera::name(type),
                     shape_string());
}

std::array<size_t, kMaxDims> contiguous_strides(DType type, const std::array<int64_t, kMaxDims>& ne) {
  std::array<size_t, kMaxDims> nb{};
  nb[0] = traits(type).block_bytes;
  nb[1] = row_bytes(type, ne[0]);
  for (int d = 2; d < kMaxDims; ++d) nb[d] = nb[d - 1] * static_cast<size_t>(ne[d - 1]);
  return nb;
}

}  // namespace tessera
