#pragma once
// Element types and their traits (block sizes and GGUF ids follow ggml).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tessera {

enum class DType : uint8_t { F32, F16, BF16, Q4_0, Q8_0, I32 };
inline constexpr int kDTypeCount = 6;
inline constexpr DType kAllDTypes[kDTypeCount] = {DType::F32,  DType::F16,  DType::BF16,
                                                  DType::Q4_0, DType::Q8_0, DType::I32};

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

std::optional<DType> dtype_from_gguf(uint32_t gguf_id) noexcept;
std::optional<DType> dtype_from_name(std::string_view name) noexcept;

// Bytes of a contiguous row of ne0 elements (ne0 must be a multiple of the block size).
size_t row_bytes(DType type, int64_t ne0) noexcept;

}  // namespace tessera
