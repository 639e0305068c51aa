// The op x type support matrix: core's table (tessera/op_types.h) asked of a backend, one probe
// node per type combination, built by the op's own builder.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "conformance/harness.h"
#include "core/check.h"
#include "tessera/blocks.h"
#include "tessera/error.h"
#include "tessera/ops.h"

namespace tessera::conformance {
namespace {

// The source slots an op uses (any rule admits a tensor there).
size_t n_slots(Op op) {
  size_t n = 0;
  for (const OpTypeRule& r : op_type_rules(op))
    for (size_t i = 0; i < kMaxSources; ++i)
      if (r.src[i].members() != std::vector<std::optional<DType>>{std::nullopt}) n = std::max(n, i + 1);
  return n;
}

// Names of a node's source slots in table labels.
const char* slot_name(Op op, size_t i) {
  switch (op) {
    case Op::SoftMax:
      return i == 1 ? "mask" : i == 2 ? "sinks" : "a";
    case Op::AddId:
      return i == 0 ? "a" : i == 1 ? "b" : "ids";
    case Op::Glu:
      return i == 0 ? "gate" : "up";
    case Op::FlashAttnExt:
      return i == 0 ? "q" : i == 1 ? "k" : i == 2 ? "v" : i == 3 ? "mask" : "sinks";
    case Op::Rope:
      return i == 1 ? "positions" : i == 2 ? "freq factors" : "a";
    case Op::GetRows:
      return i == 1 ? "indices" : "a";
    case Op::MulMatId:
      return i == 0 ? "as" : i == 1 ? "b" : "ids";
    case Op::Im2Col:
      return i == 0 ? "kernel" : "input";
    default:
      return i == 0 ? "a" : i == 1 ? "b" : "c";
  }
}

// The slot a table's columns vary: the destination for CPY, the result for IM2COL and ARANGE,
// else the first source. -1 stands for the result.
int column_slot(Op op) {
  if (op == Op::Cpy || op == Op::FlashAttnExt) return 1;  // CPY's destination, attention's K/V
  if (op == Op::Im2Col || op == Op::Arange) return -1;
  return 0;
}

std::optional<DType> slot_type(const OpTypes& t, int slot) {
  return slot < 0 ? std::optional<DType>(t.result) : t.src[static_cast<size_t>(slot)];
}

// The variants of an op that a backend may support separately (the unary functions).
int n_variants(Op op) { return op == Op::Unary ? kUnaryOpCount : 1; }

std::string variant_label(Op op, int variant) {
  if (op != Op::Unary) return std::string(op_name(op));
  return fmt::format("{} {}", op_name(op), unary_op_name(static_cast<UnaryOp>(variant)));
}

}  // namespace

Tensor* build_probe(Context& ctx, Op op, const OpTypes& types, const LeafMaker& leaf, int variant) {
  auto src = [&](size_t i) -> DType {
    if (!types.src[i])
      throw Error(ErrorCode::InvalidArgument, fmt::format("{}: needs source {}", op_name(op), i));
    return *types.src[i];
  };
  const Fill near_one = Fill::NearOne;  // keeps DIV and the norms away from tiny values
  // Ops that take block types get rows of kSuperBlock elements: whole blocks of every type.
  Tensor* node = nullptr;
  switch (op) {
    case Op::Dup:
      node = ops::dup(ctx, leaf(src(0), {kSuperBlock, 4, 1, 1}, near_one, 0));
      break;
    case Op::Cont:
      node = ops::cont(ctx, leaf(src(0), {kSuperBlock, 4, 1, 1}, near_one, 0));
      break;
    case Op::Cpy:
      node = ops::cpy(ctx, leaf(src(0), {kSuperBlock, 4, 1, 1}, near_one, 0),
                      leaf(src(1), {kSuperBlock, 4, 1, 1}, Fill::Zero, 0));
      break;
    case Op::Repeat:
      node = ops::repeat(ctx, leaf(src(0), {64, 1, 1, 1}, near_one, 0), ctx.new_tensor(DType::F32, 64, 4));
      break;
    case Op::GetRows:
      node = ops::get_rows(ctx, leaf(src(0), {kSuperBlock, 5, 1, 1}, near_one, 0),
                           leaf(src(1), {3, 1, 1, 1}, Fill::Indices, 5));
      break;
    case Op::Concat:
      node = ops::concat(ctx, leaf(src(0), {64, 4, 1, 1}, near_one, 0),
                         leaf(src(1), {64, 3, 1, 1}, near_one, 0), 1);
      break;
    case Op::Add:
    case Op::Mul:
    case Op::Div: {
      Tensor* a = leaf(src(0), {64, 4, 1, 1}, near_one, 0);
      Tensor* b = leaf(src(1), {64, 1, 1, 1}, near_one, 0);
      node = op == Op::Add ? ops::add(ctx, a, b) : op == Op::Mul ? ops::mul(ctx, a, b) : ops::div(ctx, a, b);
      break;
    }
    case Op::Acc: {
      Tensor* a = leaf(src(0), {64, 4, 1, 1}, Fill::Uniform, 0);
      node = ops::acc(ctx, a, leaf(src(1), {8, 2, 1, 1}, Fill::Uniform, 0), a->nb[1], a->nb[2], a->nb[3], 0);
      break;
    }
    case Op::AddId:
      node = ops::add_id(ctx, leaf(src(0), {64, 2, 3, 1}, Fill::Uniform, 0),
                         leaf(src(1), {64, 4, 1, 1}, Fill::Uniform, 0),
                         leaf(src(2), {2, 3, 1, 1}, Fill::Indices, 4));
      break;
    case Op::Glu: {
      Tensor* up = types.src[1] ? leaf(*types.src[1], {64, 4, 1, 1}, Fill::Uniform, 0) : nullptr;
      node = ops::swiglu_oai(ctx, leaf(src(0), {64, 4, 1, 1}, Fill::Uniform, 0), up, 1.702f, 0.5f);
      break;
    }
    case Op::Unary:
      node = ops::unary(ctx, leaf(src(0), {64, 4, 1, 1}, Fill::Uniform, 0), static_cast<UnaryOp>(variant));
      break;
    case Op::LeakyRelu:
      node = ops::leaky_relu(ctx, leaf(src(0), {64, 4, 1, 1}, Fill::Uniform, 0), 0.1f);
      break;
    case Op::Scale:
      node = ops::scale(ctx, leaf(src(0), {64, 4, 1, 1}, Fill::Uniform, 0), 2.0f, 0.5f);
      break;
    case Op::Sqr:
      node = ops::sqr(ctx, leaf(src(0), {64, 4, 1, 1}, Fill::Uniform, 0));
      break;
    case Op::Clamp:
      node = ops::clamp(ctx, leaf(src(0), {64, 4, 1, 1}, Fill::Uniform, 0), -0.5f, 0.5f);
      break;
    case Op::Norm:
      node = ops::norm(ctx, leaf(src(0), {64, 4, 1, 1}, Fill::Uniform, 0), 1e-5f);
      break;
    case Op::RmsNorm:
      node = ops::rms_norm(ctx, leaf(src(0), {64, 4, 1, 1}, Fill::Uniform, 0), 1e-5f);
      break;
    case Op::GroupNorm:
      node = ops::group_norm(ctx, leaf(src(0), {16, 4, 4, 1}, Fill::Uniform, 0), 2, 1e-5f);
      break;
    case Op::Upscale:
      node = ops::upscale(ctx, leaf(src(0), {16, 4, 1, 1}, Fill::Uniform, 0), 32, 8, 1, 1);
      break;
    case Op::Pad:
      node = ops::pad(ctx, leaf(src(0), {16, 4, 1, 1}, Fill::Uniform, 0), {2, 3, 1, 0, 0, 0, 0, 0});
      break;
    case Op::Arange:
      node = ops::arange(ctx, 0.0f, 10.0f, 1.0f);
      break;
    case Op::TimestepEmbedding:
      node = ops::timestep_embedding(ctx, leaf(src(0), {4, 1, 1, 1}, Fill::Uniform, 0), 16, 10000);
      break;
    case Op::MulMat:
      node = ops::mul_mat(ctx, leaf(src(0), {kSuperBlock, 8, 1, 1}, Fill::Uniform, 0),
                          leaf(src(1), {kSuperBlock, 3, 1, 1}, Fill::Uniform, 0));
      break;
    case Op::MulMatId:
      node = ops::mul_mat_id(ctx, leaf(src(0), {kSuperBlock, 8, 4, 1}, Fill::Uniform, 0),
                             leaf(src(1), {kSuperBlock, 1, 3, 1}, Fill::Uniform, 0),
                             leaf(src(2), {2, 3, 1, 1}, Fill::Indices, 4));
      break;
    case Op::DiagMaskInf:
      node = ops::diag_mask_inf(ctx, leaf(src(0), {16, 4, 2, 1}, Fill::Uniform, 0), 1);
      break;
    case Op::SoftMax: {
      Tensor* mask = types.src[1] ? leaf(*types.src[1], {16, 4, 1, 1}, Fill::Uniform, 0) : nullptr;
      Tensor* sinks = types.src[2] ? leaf(*types.src[2], {2, 1, 1, 1}, Fill::Uniform, 0) : nullptr;
      node = ops::soft_max(ctx, leaf(src(0), {16, 4, 2, 1}, Fill::Uniform, 0), mask, 0.5f, 0.0f, sinks);
      break;
    }
    case Op::FlashAttnExt: {
      Tensor* mask = types.src[3] ? leaf(*types.src[3], {32, 4, 1, 1}, Fill::Uniform, 0) : nullptr;
      Tensor* sinks = types.src[4] ? leaf(*types.src[4], {4, 1, 1, 1}, Fill::Uniform, 0) : nullptr;
      node = ops::flash_attn_ext(
          ctx, leaf(src(0), {16, 4, 4, 1}, Fill::Uniform, 0), leaf(src(1), {16, 32, 2, 1}, Fill::Uniform, 0),
          leaf(src(2), {16, 32, 2, 1}, Fill::Uniform, 0), mask, 0.25f, 0.0f, 0.0f, false, sinks);
      break;
    }
    case Op::Rope: {
      RopeParams p;
      p.n_dims = 16;
      Tensor* ff = types.src[2] ? leaf(*types.src[2], {8, 1, 1, 1}, near_one, 0) : nullptr;
      node = ops::rope(ctx, leaf(src(0), {16, 2, 3, 1}, Fill::Uniform, 0),
                       leaf(src(1), {3, 1, 1, 1}, Fill::Positions, 100), ff, p);
      break;
    }
    case Op::Im2Col:
      node = ops::im2col(ctx, leaf(src(0), {3, 3, 2, 2}, Fill::Uniform, 0),
                         leaf(src(1), {8, 8, 2, 1}, Fill::Uniform, 0), 1, 1, 1, 1, 1, 1, true, types.result);
      break;
    case Op::Pool2D:
      node = ops::pool_2d(ctx, leaf(src(0), {8, 8, 2, 1}, Fill::Uniform, 0), PoolOp::Max, 2, 2, 2, 2, 0, 0);
      break;
    case Op::SumRows:
      node = ops::sum_rows(ctx, leaf(src(0), {64, 4, 1, 1}, Fill::Uniform, 0));
      break;
    case Op::Argsort:
      node = ops::argsort(ctx, leaf(src(0), {16, 4, 1, 1}, Fill::UniqueRow, 0), SortOrder::Ascending);
      break;
    default:
      throw Error(ErrorCode::InvalidArgument, fmt::format("{}: no probe (a view or leaf op)", op_name(op)));
  }
  // The builder decides the result type and takes only the sources it knows: anything else is a
  // combination the op does not have.
  if (op_types(*node) != types)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}: {} builds as {}", op_name(op), describe(types), describe(op_types(*node))));
  return node;
}

LeafMaker plain_leaf(Context& ctx) {
  return [&ctx](DType t, std::array<int64_t, 4> ne, Fill, int64_t) {
    return ctx.new_tensor(t, std::span<const int64_t>(ne.data(), 4));
  };
}

std::vector<OpTypes> all_op_types(Op op) {
  std::vector<std::optional<DType>> choices(kAllDTypes, kAllDTypes + kDTypeCount);
  choices.push_back(std::nullopt);
  // Whether some rule admits the result and sources [0, n) of t: a prefix no rule admits is
  // undefined whatever follows, so it is extended once (the later slots absent), not by every
  // choice (FLASH_ATTN_EXT's five slots would make 45 million combinations).
  const auto admitted = [&](const OpTypes& t, size_t n) {
    for (const OpTypeRule& r : op_type_rules(op)) {
      bool all = r.result.contains(t.result);
      for (size_t i = 0; all && i < n; ++i) all = r.src[i].contains(t.src[i]);
      if (all) return true;
    }
    return false;
  };
  std::vector<OpTypes> out;
  const size_t slots = n_slots(op);
  for (DType result : kAllDTypes) {
    std::vector<OpTypes> partial{OpTypes{result, {}}};
    for (size_t i = 0; i < slots; ++i) {
      std::vector<OpTypes> next;
      for (const OpTypes& p : partial) {
        if (!admitted(p, i)) {
          next.push_back(p);  // slot i stays absent
          continue;
        }
        for (auto c : choices) {
          OpTypes t = p;
          t.src[i] = c;
          next.push_back(t);
        }
      }
      partial = std::move(next);
    }
    out.insert(out.end(), partial.begin(), partial.end());
  }
  return out;
}

RetypedProbe::RetypedProbe(Context& ctx, Op op) : ctx_(ctx) {
  const auto defined = defined_op_types(op);
  TESSERA_ASSERT(!defined.empty());
  node_ = build_probe(ctx, op, defined.front(), plain_leaf(ctx), 0);
}

const Tensor& RetypedProbe::with(const OpTypes& types) {
  node_->type = types.result;
  for (size_t i = 0; i < kMaxSources; ++i) {
    if (!types.src[i]) {
      node_->src[i] = nullptr;
      continue;
    }
    Tensor*& source = sources_[i][static_cast<size_t>(*types.src[i])];
    if (source == nullptr)
      source = ctx_.new_tensor(*types.src[i], kSuperBlock, 4);  // whole blocks of every type
    node_->src[i] = source;
  }
  return *node_;
}

std::string support_table(const Target& target) {
  auto backend = target.make_backend();
  std::string out = fmt::format("| {} op |", target.name);
  std::string rule = "| --- |";
  for (DType t : kAllDTypes) {
    out += fmt::format(" {} |", name(t));
    rule += " :-: |";
  }
  out += "\n" + rule + "\n";
  for (int i = 0; i < kOpCount; ++i) {
    const Op op = static_cast<Op>(i);
    if (op == Op::None || is_view_op(op)) continue;
    const auto defined = defined_op_types(op);
    const int col = column_slot(op);
    // A source slot splits rows when it takes several types beside one column type (ADD's b, MUL_MAT's b,
    // SOFT_MAX's mask); slots that follow the column (CONCAT's b) do not.
    std::vector<bool> varies(kMaxSources, false);
    for (const OpTypes& x : defined)
      for (const OpTypes& y : defined)
        if (slot_type(x, col) == slot_type(y, col))
          for (size_t s = 0; s < kMaxSources; ++s)
            if (static_cast<int>(s) != col && x.src[s] != y.src[s]) varies[s] = true;
    auto key_of = [&](const OpTypes& t) {
      OpTypes k;
      for (size_t s = 0; s < kMaxSources; ++s)
        if (varies[s]) k.src[s] = t.src[s];
      return k;
    };
    std::vector<OpTypes> keys;
    for (const OpTypes& t : defined)
      if (std::find(keys.begin(), keys.end(), key_of(t)) == keys.end()) keys.push_back(key_of(t));
    for (int variant = 0; variant < n_variants(op); ++variant)
      for (const OpTypes& key : keys) {
        std::string label = variant_label(op, variant);
        std::string detail;
        for (size_t s = 0; s < kMaxSources; ++s)
          if (key.src[s])
            detail += fmt::format("{}{} {}", detail.empty() ? "" : ", ", slot_name(op, s), name(*key.src[s]));
        if (!detail.empty()) label += " (" + detail + ")";
        out += "| " + label + " |";
        for (DType t : kAllDTypes) {
          const char* cell = " |";  // the op does not take this type here (OPS.md)
          for (const OpTypes& d : defined) {
            if (key_of(d) != key || slot_type(d, col) != t) continue;
            Context ctx;
            Tensor* node = build_probe(ctx, op, d, plain_leaf(ctx), variant);
            cell = backend->supports(*node) ? " yes |" : " no |";
            break;
          }
          out += cell;
        }
        out += "\n";
      }
  }
  return out;
}

}  // namespace tessera::conformance
