// GGUF value and tensor type tables shared by the reader, the writer and the tools.
#include <cstring>
#include <type_traits>

#include "core/check.h"
#include "core/gguf_internal.h"

namespace tessera::gguf {
namespace {

// ggml's tensor types by id (block size, bytes per block). Empty names are ids ggml has retired.
constexpr GgmlType kGgmlTypes[] = {
    {"f32", 1, 4},      {"f16", 1, 2},        {"q4_0", 32, 18},    {"q4_1", 32, 20},     {"", 0, 0},
    {"", 0, 0},         {"q5_0", 32, 22},     {"q5_1", 32, 24},    {"q8_0", 32, 34},     {"q8_1", 32, 36},
    {"q2_K", 256, 84},  {"q3_K", 256, 110},   {"q4_K", 256, 144},  {"q5_K", 256, 176},   {"q6_K", 256, 210},
    {"q8_K", 256, 292}, {"iq2_xxs", 256, 66}, {"iq2_xs", 256, 74}, {"iq3_xxs", 256, 98}, {"iq1_s", 256, 50},
    {"iq4_nl", 32, 18}, {"iq3_s", 256, 110},  {"iq2_s", 256, 82},  {"iq4_xs", 256, 136}, {"i8", 1, 1},
    {"i16", 1, 2},      {"i32", 1, 4},        {"i64", 1, 8},       {"f64", 1, 8},        {"iq1_m", 256, 56},
    {"bf16", 1, 2},     {"", 0, 0},           {"", 0, 0},          {"", 0, 0},           {"tq1_0", 256, 54},
    {"tq2_0", 256, 66}, {"", 0, 0},           {"", 0, 0},          {"", 0, 0},           {"mxfp4", 32, 17},
};

}  // namespace

std::string_view type_name(ValueType type) noexcept {
  switch (type) {
    case ValueType::U8:
      return "u8";
    case ValueType::I8:
      return "i8";
    case ValueType::U16:
      return "u16";
    case ValueType::I16:
      return "i16";
    case ValueType::U32:
      return "u32";
    case ValueType::I32:
      return "i32";
    case ValueType::F32:
      return "f32";
    case ValueType::Bool:
      return "bool";
    case ValueType::String:
      return "string";
    case ValueType::Array:
      return "array";
    case ValueType::U64:
      return "u64";
    case ValueType::I64:
      return "i64";
    case ValueType::F64:
      return "f64";
  }
  return "?";
}

ValueType value_type(const Value& v) noexcept { return static_cast<ValueType>(v.index()); }

size_t ArrayValue::size() const noexcept {
  if (type == ValueType::String) return strings.size();
  return std::visit([](const auto& vec) { return vec.size(); }, numbers);
}

const GgmlType* ggml_type(uint32_t id) noexcept {
  if (id >= std::size(kGgmlTypes) || kGgmlTypes[id].block_size == 0) return nullptr;
  return &kGgmlTypes[id];
}

std::string TensorInfo::type_name() const {
  const GgmlType* g = ggml_type(type_id);
  return g != nullptr ? std::string(g->name) : fmt::format("type {}", type_id);
}

DType TensorInfo::dtype() const {
  if (!type)
    raise(ErrorCode::Unsupported, "tensor '{}' has type {} (ggml id {}), which Tessera cannot compute with",
          name, type_name(), type_id);
  return *type;
}

Tensor TensorInfo::descriptor() const {
  Tensor t;
  t.type = dtype();
  t.ne = ne;
  t.nb = contiguous_strides(t.type, ne);
  t.name = name;
  return t;
}

bool same_value(const Value& a, const Value& b) noexcept {
  if (a.index() != b.index()) return false;
  return std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        const T& y = std::get<T>(b);
        if constexpr (std::is_same_v<T, ArrayValue>) {
          if (x.type != y.type || x.strings != y.strings || x.numbers.index() != y.numbers.index())
            return false;
          return std::visit(
              [&](const auto& vx) {
                using V = std::decay_t<decltype(vx)>;
                const V& vy = std::get<V>(y.numbers);
                if constexpr (std::is_floating_point_v<typename V::value_type>)
                  return vx.size() == vy.size() &&
                         (vx.empty() || std::memcmp(vx.data(), vy.data(), vx.size() * sizeof vx[0]) == 0);
                else
                  return vx == vy;
              },
              x.numbers);
        } else if constexpr (std::is_floating_point_v<T>) {
          return std::memcmp(&x, &y, sizeof x) == 0;
        } else {
          return x == y;
        }
      },
      a);
}

}  // namespace tessera::gguf
