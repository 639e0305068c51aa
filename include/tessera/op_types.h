#pragma once
// The op x type table: for each op, the type combinations (result and sources) that Tessera's op
// semantics define (../shared/OPS.md). The builders admit exactly these; the CPU backend runs
// every one of them, and a device op library may support fewer, never more.
#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tessera/tensor.h"

namespace tessera {

// A set of types for one slot of a node (its result or one source); it may also admit "no tensor"
// (an optional source left out).
class TypeSet {
 public:
  constexpr TypeSet() = default;
  constexpr TypeSet(std::initializer_list<DType> types) {
    for (DType t : types) bits_ |= bit(t);
  }
  static constexpr TypeSet absent() { return TypeSet(kAbsent); }
  constexpr TypeSet with_absent() const { return TypeSet(bits_ | kAbsent); }
  constexpr TypeSet with(DType t) const { return TypeSet(bits_ | bit(t)); }
  constexpr TypeSet with(TypeSet other) const { return TypeSet(bits_ | other.bits_); }
  constexpr bool contains(std::optional<DType> t) const { return (bits_ & (t ? bit(*t) : kAbsent)) != 0; }
  constexpr bool admits_absent() const { return (bits_ & kAbsent) != 0; }
  // Members in kAllDTypes order, then nullopt when absent is admitted.
  std::vector<std::optional<DType>> members() const;

 private:
  static constexpr uint32_t kAbsent = 1u << kDTypeCount;
  static constexpr uint32_t bit(DType t) { return 1u << static_cast<unsigned>(t); }
  explicit constexpr TypeSet(uint32_t bits) : bits_(bits) {}
  uint32_t bits_ = 0;
};

// The types of one node: its result and each source slot (nullopt = no tensor there).
struct OpTypes {
  DType result = DType::F32;
  std::array<std::optional<DType>, kMaxSources> src{};
  bool operator==(const OpTypes&) const = default;
};
OpTypes op_types(const Tensor& node);
std::string describe(const OpTypes& types);  // "f32 <- q4_0, f16"

// One rule of an op: every combination of its slots' sets is defined.
struct OpTypeRule {
  TypeSet result;
  std::array<TypeSet, kMaxSources> src{TypeSet::absent(), TypeSet::absent(), TypeSet::absent(),
                                       TypeSet::absent(), TypeSet::absent()};
};

// The rules of op; empty for NONE and the metadata-only ops (views take every type).
std::span<const OpTypeRule> op_type_rules(Op op);
// Every combination the rules of op define (each once), for tables and tests.
std::vector<OpTypes> defined_op_types(Op op);
// The types any rule of op admits in source slot `slot` (no absent marker), e.g. every weight type
// for MUL_MAT's slot 0: what tests iterate so that they follow the table.
TypeSet op_source_types(Op op, size_t slot);
// True when op defines this combination; always true for NONE and the views.
bool op_types_defined(Op op, const OpTypes& types);
bool op_types_defined(const Tensor& node);

}  // namespace tessera
