#pragma once
// Element types and their traits (block sizes and GGUF ids follow ggml).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tessera {

// Every type Tessera knows, in ggml's formats. The op x type table (tessera/op_types.h) says which
// ops take which; Q8_K is the K-quants' activation type, not a weight type of files.
enum class DType : uint8_t {
  F32,
  F16,
  BF16,
  Q4_0,
  Q8_0,
  I32,
  Q4_1,
  Q5_0,
  Q5_1,
  Q2_K,
  Q3_K,
  Q4_K,
  Q5_K,
  Q6_K,
  Q8_K,
  IQ4_NL,
  IQ4_XS,
  IQ2_XXS,
  IQ2_XS,
  IQ2_S,
  IQ3_XXS,
  IQ3_S,
  IQ1_S,
  IQ1_M,
  MXFP4,
};
inline constexpr int kDTypeCount = 25;
inline constexpr DType kAllDTypes[kDTypeCount] = {
    DType::F32,   DType::F16,    DType::BF16,   DType::Q4_0,    DType::Q8_0,   DType::I32,   DType::Q4_1,
    DType::Q5_0,  DType::Q5_1,   DType::Q2_K,   DType::Q3_K,    DType::Q4_K,   DType::Q5_K,  DType::Q6_K,
    DType::Q8_K,  DType::IQ4_NL, DType::IQ4_XS, DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ3_XXS,
    DType::IQ3_S, DType::IQ1_S,  DType::IQ1_M,  DType::MXFP4};

struct DTypeTraits {
  std::string_view name;  // "f32", "q4_0", ... (ggml's spelling)
  int64_t block_size;     // elements per block (1 for scalar types)
  size_t block_bytes;     // bytes per block
  uint32_t gguf_id;       // ggml_type value used in GGUF files
  bool quantized;
};

const DTypeTraits& traits(DType type) noexcept;
inline std::string_view name(DType type) noexcept { return traits(type).name; }
inline bool is_quantized(DType type) noexcept { return traits(type).quantized; }
// The I-quants of grid codebooks (IQ1_S ... IQ3_S): read, multiplied and gathered; written only by
// the weight quantizer (quantize_weights, with an importance matrix where ggml needs one), so no op
// converts into them.
inline bool is_grid_iquant(DType type) noexcept { return type >= DType::IQ2_XXS && type <= DType::IQ1_M; }

std::optional<DType> dtype_from_gguf(uint32_t gguf_id) noexcept;
std::optional<DType> dtype_from_name(std::string_view name) noexcept;

// Bytes of a contiguous row of ne0 elements (ne0 must be a multiple of the block size).
size_t row_bytes(DType type, int64_t ne0) noexcept;

}  // namespace tessera
