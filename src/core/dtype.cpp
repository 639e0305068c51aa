#include "tessera/dtype.h"

namespace tessera {
namespace {

constexpr DTypeTraits kTraits[kDTypeCount] = {
    {"f32", 1, 4, 0, false},   {"f16", 1, 2, 1, false},   {"bf16", 1, 2, 30, false},
    {"q4_0", 32, 18, 2, true}, {"q8_0", 32, 34, 8, true}, {"i32", 1, 4, 26, false},
};

}  // namespace

const DTypeTraits& traits(DType type) noexcept { return kTraits[static_cast<int>(type)]; }

std::optional<DType> dtype_from_gguf(uint32_t gguf_id) noexcept {
  for (DType t : kAllDTypes)
    if (traits(t).gguf_id == gguf_id) return t;
  return std::nullopt;
}

std::optional<DType> dtype_from_name(std::string_view name) noexcept {
  for (DType t : kAllDTypes)
    if (traits(t).name == name) return t;
  return std::nullopt;
}

size_t row_bytes(DType type, int64_t ne0) noexcept {
  const auto& t = traits(type);
  return static_cast<size_t>(ne0 / t.block_size) * t.block_bytes;
}

}  // namespace tessera
