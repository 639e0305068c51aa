#include "tessera/dtype.h"

namespace tessera {
namespace {

constexpr DTypeTraits kTraits[kDTypeCount] = {
    {"f32", 1, 4, 0, false},       {"f16", 1, 2, 1, false},        {"bf16", 1, 2, 30, false},
    {"q4_0", 32, 18, 2, true},     {"q8_0", 32, 34, 8, true},      {"i32", 1, 4, 26, false},
    {"q4_1", 32, 20, 3, true},     {"q5_0", 32, 22, 6, true},      {"q5_1", 32, 24, 7, true},
    {"q2_K", 256, 84, 10, true},   {"q3_K", 256, 110, 11, true},   {"q4_K", 256, 144, 12, true},
    {"q5_K", 256, 176, 13, true},  {"q6_K", 256, 210, 14, true},   {"q8_K", 256, 292, 15, true},
    {"iq4_nl", 32, 18, 20, true},  {"iq4_xs", 256, 136, 23, true}, {"iq2_xxs", 256, 66, 16, true},
    {"iq2_xs", 256, 74, 17, true}, {"iq2_s", 256, 82, 22, true},   {"iq3_xxs", 256, 98, 18, true},
    {"iq3_s", 256, 110, 21, true}, {"iq1_s", 256, 50, 19, true},   {"iq1_m", 256, 56, 29, true},
    {"mxfp4", 32, 17, 39, true},
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
