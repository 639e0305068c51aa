// The op x type table of ../shared/OPS.md. The builders in ops.cpp check the same rules with
// messages of their own; tests/core/op_types_test.cpp keeps the two in agreement.
#include "tessera/op_types.h"

#include <fmt/format.h>

#include <algorithm>

namespace tessera {
namespace {

constexpr DType F32 = DType::F32, F16 = DType::F16, BF16 = DType::BF16, Q4_0 = DType::Q4_0,
                Q8_0 = DType::Q8_0, I32 = DType::I32;
// MUL_MAT / GET_ROWS sources: every type of model files. Q8_K is only the K-quants' activation
// type inside MUL_MAT, so no op takes it.
const TypeSet kGridIQuants{DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ3_XXS,
                           DType::IQ3_S,   DType::IQ1_S,  DType::IQ1_M};
const TypeSet kWeights =
    TypeSet{F32,         F16,           BF16,          Q4_0,        Q8_0,        DType::Q4_1,
            DType::Q5_0, DType::Q5_1,   DType::Q2_K,   DType::Q3_K, DType::Q4_K, DType::Q5_K,
            DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4}
        .with(kGridIQuants);
const TypeSet kAll = kWeights.with(I32);
const TypeSet kFloats{F32, F16};                  // F32 and F16
const TypeSet kUnquantized{F32, F16, BF16, I32};  // element types (no blocks)

OpTypeRule rule(TypeSet result, std::initializer_list<TypeSet> srcs) {
  OpTypeRule r;
  r.result = result;
  size_t i = 0;
  for (TypeSet s : srcs) r.src[i++] = s;
  return r;
}

// Same type in and out (DUP, CONT, REPEAT, CONCAT, the elementwise unary ops): one rule per type.
std::vector<OpTypeRule> same_type(TypeSet types, int n_sources) {
  std::vector<OpTypeRule> rules;
  for (auto t : types.members()) {
    const TypeSet s{*t};
    rules.push_back(n_sources == 1 ? rule(s, {s}) : rule(s, {s, s}));
  }
  return rules;
}

std::vector<OpTypeRule> rules_of(Op op) {
  switch (op) {
    case Op::None:
    case Op::Reshape:
    case Op::View:
    case Op::Permute:
    case Op::Transpose:
    case Op::Count_:
      return {};
    case Op::Dup:
    case Op::Cont:
      return same_type(kAll, 1);
    case Op::Cpy: {
      // The result is a view of b. Every type converts to every type through f32, except that i32
      // copies only to i32 and f32 and the grid I-quants (written by the weight quantizer, not by
      // ops) only to themselves.
      std::vector<OpTypeRule> rules;
      for (auto b : kAll.members())
        rules.push_back(kGridIQuants.contains(*b) ? rule({*b}, {{*b}, {*b}}) : rule({*b}, {kWeights, {*b}}));
      rules.push_back(rule({I32}, {{I32}, {I32}}));
      rules.push_back(rule({F32}, {{I32}, {F32}}));
      return rules;
    }
    case Op::Repeat:
      return same_type(kUnquantized, 1);
    case Op::GetRows:
      return {rule({F32}, {kWeights, {I32}}), rule({I32}, {{I32}, {I32}})};
    case Op::Concat:
      return same_type(kUnquantized, 2);
    case Op::Add:
    case Op::Mul:
    case Op::Div:
      return {rule({F32}, {{F32}, {F32}}), rule({F16}, {{F16}, {F16, F32}})};
    case Op::Acc:
      return {rule({F32}, {{F32}, {F32}})};
    case Op::AddId:  // a, the rows of biases, the rows' ids
      return {rule({F32}, {{F32}, {F32}, {I32}})};
    case Op::Glu:  // gate (or gate and up fused), up
      return {rule({F32}, {{F32}, TypeSet{F32}.with_absent()})};
    case Op::Unary:
    case Op::LeakyRelu:
    case Op::Scale:
    case Op::Sqr:
    case Op::Clamp:
      return same_type(kFloats, 1);
    case Op::Norm:
    case Op::RmsNorm:
    case Op::GroupNorm:
    case Op::Upscale:
    case Op::Pad:
    case Op::TimestepEmbedding:
    case Op::DiagMaskInf:
    case Op::SumRows:
      return {rule({F32}, {{F32}})};
    case Op::Arange:
      return {rule({F32}, {})};
    case Op::MulMat:
      return {rule({F32}, {kWeights, kFloats})};
    case Op::MulMatId:  // expert weights, b, the experts' ids
      return {rule({F32}, {kWeights, kFloats, {I32}})};
    case Op::SoftMax:
      return {rule({F32}, {{F32}, kFloats.with_absent(), TypeSet{F32}.with_absent()})};  // a, mask, sinks
    case Op::FlashAttnExt:
      // q, k, v, mask: K and V of one type, as a KV cache stores them.
      return {rule({F32}, {{F32}, {F32}, {F32}, kFloats.with_absent(), TypeSet{F32}.with_absent()}),
              rule({F32}, {{F32}, {F16}, {F16}, kFloats.with_absent(), TypeSet{F32}.with_absent()})};
    case Op::Rope:
      return {rule({F32}, {{F32}, {I32}, TypeSet{F32}.with_absent()}),
              rule({F16}, {{F16}, {I32}, TypeSet{F32}.with_absent()})};
    case Op::Im2Col:
      return {rule(kFloats, {kFloats, kFloats})};
    case Op::Pool2D:
      return {rule({F32}, {kFloats})};
    case Op::Argsort:
      return {rule({I32}, {{F32}})};
  }
  return {};
}

struct Table {
  std::array<std::vector<OpTypeRule>, kOpCount> rules;
  Table() {
    for (int i = 0; i < kOpCount; ++i) rules[static_cast<size_t>(i)] = rules_of(static_cast<Op>(i));
  }
};

const Table& table() {
  static const Table t;
  return t;
}

bool no_rules(Op op) { return op == Op::None || is_view_op(op); }

}  // namespace

std::vector<std::optional<DType>> TypeSet::members() const {
  std::vector<std::optional<DType>> out;
  for (DType t : kAllDTypes)
    if (contains(t)) out.push_back(t);
  if (admits_absent()) out.push_back(std::nullopt);
  return out;
}

OpTypes op_types(const Tensor& node) {
  OpTypes t;
  t.result = node.type;
  for (size_t i = 0; i < kMaxSources; ++i)
    if (node.src[i] != nullptr) t.src[i] = node.src[i]->type;
  return t;
}

std::string describe(const OpTypes& types) {
  std::string s = fmt::format("{} <-", name(types.result));
  size_t last = 0;
  for (size_t i = 0; i < kMaxSources; ++i)
    if (types.src[i]) last = i + 1;
  for (size_t i = 0; i < last; ++i)
    s += fmt::format("{} {}", i == 0 ? "" : ",", types.src[i] ? name(*types.src[i]) : "none");
  return s;
}

std::span<const OpTypeRule> op_type_rules(Op op) {
  const int i = static_cast<int>(op);
  if (i < 0 || i >= kOpCount) return {};
  return table().rules[static_cast<size_t>(i)];
}

std::vector<OpTypes> defined_op_types(Op op) {
  std::vector<OpTypes> out;
  for (const OpTypeRule& r : op_type_rules(op)) {
    std::vector<OpTypes> partial;
    for (auto res : r.result.members()) {
      OpTypes t;
      t.result = *res;
      partial.push_back(t);
    }
    for (size_t i = 0; i < kMaxSources; ++i) {
      std::vector<OpTypes> next;
      for (const OpTypes& p : partial)
        for (auto m : r.src[i].members()) {
          OpTypes t = p;
          t.src[i] = m;
          next.push_back(t);
        }
      partial = std::move(next);
    }
    for (const OpTypes& t : partial)
      if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  }
  return out;
}

TypeSet op_source_types(Op op, size_t slot) {
  TypeSet out;
  if (slot >= kMaxSources) return out;
  for (const OpTypeRule& r : op_type_rules(op))
    for (auto t : r.src[slot].members())
      if (t) out = out.with(*t);
  return out;
}

bool op_types_defined(Op op, const OpTypes& types) {
  if (no_rules(op)) return true;
  for (const OpTypeRule& r : op_type_rules(op)) {
    bool all = r.result.contains(types.result);
    for (size_t i = 0; all && i < kMaxSources; ++i) all = r.src[i].contains(types.src[i]);
    if (all) return true;
  }
  return false;
}

bool op_types_defined(const Tensor& node) {
  const int i = static_cast<int>(node.op);
  if (i < 0 || i >= kOpCount) return false;
  return op_types_defined(node.op, op_types(node));
}

}  // namespace tessera
