// The case families of test-ops: every op of the required set, as the field's suite has them.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "conformance/harness.h"
#include "tessera/op_types.h"
#include "tessera/ops.h"

namespace tessera::conformance {
namespace {

using Ne = std::array<int64_t, 4>;
using Builder = std::function<Tensor*(Case&, Context&)>;

std::string ne_str(const Ne& ne) { return fmt::format("[{},{},{},{}]", ne[0], ne[1], ne[2], ne[3]); }
std::string tn(DType t) { return std::string(name(t)); }

class FnCase final : public Case {
 public:
  FnCase(Op op, std::string name, Builder build, double flops = 0.0)
      : op_(op), name_(std::move(name)), build_(std::move(build)), flops_(flops) {}
  std::string name() const override { return name_; }
  Op op() const override { return op_; }
  Tensor* build(Context& ctx) override { return build_(*this, ctx); }
  double flops(const Tensor&) const override { return flops_; }

 private:
  Op op_;
  std::string name_;
  Builder build_;
  double flops_;
};

// Compares each row computed alone with the same row inside a batch (within one backend).
class BatchCase final : public Case {
 public:
  // make(ctx, input, rows) returns the op applied to `input`; input has `rows` rows.
  using Make = std::function<Tensor*(Case&, Context&, int64_t rows, Tensor** batch_out,
                                     std::vector<std::pair<Tensor*, Tensor*>>& pairs)>;
  BatchCase(Op op, std::string name, Make make) : op_(op), name_(std::move(name)), make_(std::move(make)) {}
  std::string name() const override { return name_; }
  Op op() const override { return op_; }
  bool self_check() const override { return true; }
  Tensor* build(Context& ctx) override {
    pairs_.clear();
    Tensor* out = nullptr;
    make_(*this, ctx, 0, &out, pairs_);
    return out;
  }
  std::vector<std::pair<Tensor*, Tensor*>> pairs() const override { return pairs_; }

 private:
  Op op_;
  std::string name_;
  Make make_;
  std::vector<std::pair<Tensor*, Tensor*>> pairs_;
};

// A row of a 2-D+ tensor as a [ne0, 1, 1, 1] view.
Tensor* row_view(Context& ctx, Tensor* t, int64_t r) {
  return ops::view(ctx, t, {t->ne[0], 1, 1, 1}, t->nb[1], t->nb[1], t->nb[1],
                   static_cast<size_t>(r) * t->nb[1]);
}

// A non-contiguous version of a [ne] tensor: a permuted view of a leaf with dims 0 and 1 swapped.
Tensor* transposed_leaf(Case& c, Context& ctx, DType type, const Ne& ne, Fill fill = Fill::Uniform) {
  Tensor* base = c.leaf(ctx, type, {ne[1], ne[0], ne[2], ne[3]}, fill);
  return ops::transpose(ctx, base);
}

void add(std::vector<std::unique_ptr<Case>>& out, Op op, std::string name, Builder b, double flops = 0.0) {
  out.push_back(std::make_unique<FnCase>(op, std::move(name), std::move(b), flops));
}

void unary_family(std::vector<std::unique_ptr<Case>>& out) {
  const Ne shapes[] = {{5, 7, 11, 13}, {128, 3, 1, 1}};
  for (DType t : {DType::F32, DType::F16}) {
    for (int u = 0; u < kUnaryOpCount; ++u) {
      const auto uop = static_cast<UnaryOp>(u);
      for (const Ne& ne : shapes)
        add(out, Op::Unary,
            fmt::format("UNARY(op={}, type={}, ne={})", unary_op_name(uop), tn(t), ne_str(ne)),
            [=](Case& c, Context& ctx) { return ops::unary(ctx, c.leaf(ctx, t, ne), uop); });
      add(out, Op::Unary,
          fmt::format("UNARY(op={}, type={}, ne=[7,5,3,1], transposed)", unary_op_name(uop), tn(t)),
          [=](Case& c, Context& ctx) {
            return ops::unary(ctx, transposed_leaf(c, ctx, t, {7, 5, 3, 1}), uop);
          });
    }
    for (const Ne& ne : shapes) {
      add(out, Op::LeakyRelu, fmt::format("LEAKY_RELU(type={}, ne={}, slope=0.1)", tn(t), ne_str(ne)),
          [=](Case& c, Context& ctx) { return ops::leaky_relu(ctx, c.leaf(ctx, t, ne), 0.1f); });
      add(out, Op::Scale, fmt::format("SCALE(type={}, ne={}, s=1.5, b=0.25)", tn(t), ne_str(ne)),
          [=](Case& c, Context& ctx) { return ops::scale(ctx, c.leaf(ctx, t, ne), 1.5f, 0.25f); });
      add(out, Op::Sqr, fmt::format("SQR(type={}, ne={})", tn(t), ne_str(ne)),
          [=](Case& c, Context& ctx) { return ops::sqr(ctx, c.leaf(ctx, t, ne)); });
      add(out, Op::Clamp, fmt::format("CLAMP(type={}, ne={}, min=-0.5, max=0.5)", tn(t), ne_str(ne)),
          [=](Case& c, Context& ctx) { return ops::clamp(ctx, c.leaf(ctx, t, ne), -0.5f, 0.5f); });
    }
    add(out, Op::Scale, fmt::format("SCALE(type={}, ne=[9,4,2,1], s=-2, b=0, transposed)", tn(t)),
        [=](Case& c, Context& ctx) {
          return ops::scale(ctx, transposed_leaf(c, ctx, t, {9, 4, 2, 1}), -2.0f, 0.0f);
        });
  }
}

// gpt-oss's pieces: ADD_ID (the experts' biases) and the clamped SwiGLU, split and fused; a limit
// of 0.5 makes the clamps bind on inputs in [-1, 1].
void gpt_oss_family(std::vector<std::unique_ptr<Case>>& out) {
  for (const Ne& ne : {Ne{64, 4, 7, 1}, Ne{33, 1, 5, 1}})
    add(out, Op::AddId, fmt::format("ADD_ID(type=f32, ne={}, n_rows=8)", ne_str(ne)),
        [=](Case& c, Context& ctx) {
          Tensor* a = c.leaf(ctx, DType::F32, ne);
          Tensor* b = c.leaf(ctx, DType::F32, {ne[0], 8, 1, 1});
          Tensor* ids = c.leaf(ctx, DType::I32, {ne[1], ne[2], 1, 1}, Fill::Indices, 8);
          return ops::add_id(ctx, a, b, ids);
        });
  for (float limit : {0.5f, 7.0f}) {
    for (const Ne& ne : {Ne{128, 4, 3, 1}, Ne{7, 5, 1, 2}})
      add(out, Op::Glu, fmt::format("GLU(op=swiglu_oai, ne={}, alpha=1.702, limit={})", ne_str(ne), limit),
          [=](Case& c, Context& ctx) {
            return ops::swiglu_oai(ctx, c.leaf(ctx, DType::F32, ne), c.leaf(ctx, DType::F32, ne), 1.702f,
                                   limit);
          });
    for (bool swapped : {false, true})
      add(out, Op::Glu,
          fmt::format("GLU(op=swiglu_oai, fused ne=[64,3,2,1], swapped={}, limit={})", swapped, limit),
          [=](Case& c, Context& ctx) {
            return ops::glu(ctx, c.leaf(ctx, DType::F32, {64, 3, 2, 1}), nullptr,
                            GluParams{GluOp::SwigluOai, swapped, 1.702f, limit});
          });
  }
}

void binary_family(std::vector<std::unique_ptr<Case>>& out) {
  const std::pair<DType, DType> mixes[] = {
      {DType::F32, DType::F32}, {DType::F16, DType::F16}, {DType::F16, DType::F32}};
  const Ne a_ne{10, 5, 4, 3};
  const Ne b_shapes[] = {{10, 5, 4, 3}, {10, 1, 1, 1}, {1, 5, 1, 1}, {10, 5, 1, 1},
                         {10, 5, 4, 1}, {1, 1, 4, 3},  {5, 5, 2, 3}, {1, 1, 1, 1}};
  for (Op op : {Op::Add, Op::Mul, Op::Div}) {
    const Fill fill = op == Op::Add ? Fill::Uniform : Fill::NearOne;
    auto build = [op](Context& ctx, Tensor* a, Tensor* b) {
      return op == Op::Add ? ops::add(ctx, a, b) : op == Op::Mul ? ops::mul(ctx, a, b) : ops::div(ctx, a, b);
    };
    for (const auto& mix : mixes) {
      const DType ta = mix.first, tb = mix.second;  // plain names: lambdas capture them (clang 14)
      for (const Ne& bn : b_shapes)
        add(out, op,
            fmt::format("{}(type_a={}, type_b={}, ne_a={}, ne_b={})", op_name(op), tn(ta), tn(tb),
                        ne_str(a_ne), ne_str(bn)),
            [=](Case& c, Context& ctx) {
              return build(ctx, c.leaf(ctx, ta, a_ne, fill), c.leaf(ctx, tb, bn, fill));
            });
      add(out, op,
          fmt::format("{}(type_a={}, type_b={}, ne_a=[6,8,2,1], ne_b=[6,1,1,1], a transposed)", op_name(op),
                      tn(ta), tn(tb)),
          [=](Case& c, Context& ctx) {
            return build(ctx, transposed_leaf(c, ctx, ta, {6, 8, 2, 1}, fill),
                         c.leaf(ctx, tb, {6, 1, 1, 1}, fill));
          });
      add(out, op,
          fmt::format("{}(type_a={}, type_b={}, ne=[6,8,2,1], b transposed)", op_name(op), tn(ta), tn(tb)),
          [=](Case& c, Context& ctx) {
            return build(ctx, c.leaf(ctx, ta, {6, 8, 2, 1}, fill),
                         transposed_leaf(c, ctx, tb, {6, 8, 2, 1}, fill));
          });
    }
  }
  add(out, Op::Acc, "ACC(type=f32, ne_a=[10,6,3,2], ne_b=[4,3,2,2], offset=row 1 col 2)",
      [](Case& c, Context& ctx) {
        Tensor* a = c.leaf(ctx, DType::F32, {10, 6, 3, 2});
        Tensor* b = c.leaf(ctx, DType::F32, {4, 3, 2, 2});
        return ops::acc(ctx, a, b, a->nb[1], a->nb[2], a->nb[3], a->nb[1] + 2 * 4);
      });
  add(out, Op::Acc, "ACC(type=f32, ne_a=[64,1,1,1], ne_b=[16,1,1,1], offset=128)", [](Case& c, Context& ctx) {
    Tensor* a = c.leaf(ctx, DType::F32, {64, 1, 1, 1});
    Tensor* b = c.leaf(ctx, DType::F32, {16, 1, 1, 1});
    return ops::acc(ctx, a, b, a->nb[1], a->nb[2], a->nb[3], 128);
  });
  // Overlapping targets: later elements of b add onto earlier ones, in b's logical order.
  add(out, Op::Acc, "ACC(type=f32, ne_a=[32,2,1,1], ne_b=[6,5,1,1], nb1=8 (overlapping), offset=16)",
      [](Case& c, Context& ctx) {
        Tensor* a = c.leaf(ctx, DType::F32, {32, 2, 1, 1});
        Tensor* b = c.leaf(ctx, DType::F32, {6, 5, 1, 1});
        return ops::acc(ctx, a, b, 8, 8 * 5, 8 * 5, 16);
      });
  add(out, Op::Acc, "ACC(type=f32, ne_a=[16,3,1,1], ne_b=[5,4,2,1], nb1=0, nb2=12 (overlapping))",
      [](Case& c, Context& ctx) {
        Tensor* a = c.leaf(ctx, DType::F32, {16, 3, 1, 1});
        Tensor* b = c.leaf(ctx, DType::F32, {5, 4, 2, 1});
        return ops::acc(ctx, a, b, 0, 12, 24, 4);
      });
}

void shape_family(std::vector<std::unique_ptr<Case>>& out) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32}) {
    add(out, Op::Repeat, fmt::format("REPEAT(type={}, ne_a=[3,2,1,1], ne=[9,4,2,3])", tn(t)),
        [=](Case& c, Context& ctx) {
          return ops::repeat(ctx, c.leaf(ctx, t, {3, 2, 1, 1}),
                             c.leaf(ctx, DType::F32, {9, 4, 2, 3}, Fill::Zero));
        });
  }
  for (DType t : {DType::F32, DType::F16}) {
    for (int dim = 0; dim < 4; ++dim) {
      Ne a{5, 4, 3, 2}, b = a;
      b[dim] = 3;
      add(out, Op::Concat,
          fmt::format("CONCAT(type={}, ne_a={}, ne_b={}, dim={})", tn(t), ne_str(a), ne_str(b), dim),
          [=](Case& c, Context& ctx) { return ops::concat(ctx, c.leaf(ctx, t, a), c.leaf(ctx, t, b), dim); });
    }
  }
  // GET_ROWS from every type, random (repeated) indices, and the edge rows 0 and ne1-1.
  for (DType t : kAllDTypes) {
    if (!op_source_types(Op::GetRows, 0).contains(t)) continue;
    const int64_t ne0 = is_quantized(t) ? traits(t).block_size * 2 : 10;
    add(out, Op::GetRows, fmt::format("GET_ROWS(type={}, ne=[{},20,3,1], rows=15)", tn(t), ne0),
        [=](Case& c, Context& ctx) {
          return ops::get_rows(ctx, c.leaf(ctx, t, {ne0, 20, 3, 1}),
                               c.leaf(ctx, DType::I32, {15, 3, 1, 1}, Fill::Indices, 20));
        });
    add(out, Op::GetRows, fmt::format("GET_ROWS(type={}, ne=[{},2,1,1], rows=7, edge indices)", tn(t), ne0),
        [=](Case& c, Context& ctx) {
          return ops::get_rows(ctx, c.leaf(ctx, t, {ne0, 2, 1, 1}),
                               c.leaf(ctx, DType::I32, {7, 1, 1, 1}, Fill::Indices, 2));
        });
  }
  // DUP/CONT of permuted and transposed sources.
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32}) {
    add(out, Op::Dup, fmt::format("DUP(type={}, ne=[5,7,3,2])", tn(t)), [=](Case& c, Context& ctx) {
      return ops::dup(ctx, c.leaf(ctx, t, {5, 7, 3, 2}));
    });
    add(out, Op::Cont, fmt::format("CONT(type={}, ne=[5,7,3,2], permuted 0,2,1,3)", tn(t)),
        [=](Case& c, Context& ctx) {
          return ops::cont(ctx, ops::permute(ctx, c.leaf(ctx, t, {5, 7, 3, 2}), 0, 2, 1, 3));
        });
    add(out, Op::Cont, fmt::format("CONT(type={}, ne=[6,4,1,1], transposed)", tn(t)),
        [=](Case& c, Context& ctx) {
          return ops::cont(ctx, transposed_leaf(c, ctx, t, {6, 4, 1, 1}));
        });
  }
  // DUP of every quantized type, and CONT of a view of whole rows in another order.
  for (DType t : kAllDTypes) {
    if (!is_quantized(t) || !op_source_types(Op::Dup, 0).contains(t)) continue;
    const int64_t ne0 = std::max<int64_t>(64, traits(t).block_size);
    add(out, Op::Dup, fmt::format("DUP(type={}, ne=[{},3,2,1])", tn(t), ne0), [=](Case& c, Context& ctx) {
      return ops::dup(ctx, c.leaf(ctx, t, {ne0, 3, 2, 1}));
    });
    add(out, Op::Cont, fmt::format("CONT(type={}, ne=[{},3,2,1], permuted 0,2,1,3)", tn(t), ne0),
        [=](Case& c, Context& ctx) {
          return ops::cont(ctx, ops::permute(ctx, c.leaf(ctx, t, {ne0, 3, 2, 1}), 0, 2, 1, 3));
        });
  }
  // CPY between every pair of float types, into every type the table allows, and out of every
  // quantized type.
  const DType floats[] = {DType::F32, DType::F16, DType::BF16};
  for (DType s : floats) {
    for (DType d : kAllDTypes) {
      OpTypes types;
      types.result = d;
      types.src[0] = s;
      types.src[1] = d;
      if (d == DType::I32 || !op_types_defined(Op::Cpy, types)) continue;
      const int64_t ne0 = std::max<int64_t>(64, traits(d).block_size);
      const int64_t pne0 = std::max<int64_t>(32, traits(d).block_size);
      add(out, Op::Cpy, fmt::format("CPY(type_src={}, type_dst={}, ne=[{},5,3,1])", tn(s), tn(d), ne0),
          [=](Case& c, Context& ctx) {
            return ops::cpy(ctx, c.leaf(ctx, s, {ne0, 5, 3, 1}), c.leaf(ctx, d, {ne0, 5, 3, 1}, Fill::Zero));
          });
      add(out, Op::Cpy,
          fmt::format("CPY(type_src={}, type_dst={}, ne=[{},4,2,1], src permuted 0,2,1,3)", tn(s), tn(d),
                      pne0),
          [=](Case& c, Context& ctx) {
            Tensor* src = ops::permute(ctx, c.leaf(ctx, s, {pne0, 2, 4, 1}), 0, 2, 1, 3);
            return ops::cpy(ctx, src, c.leaf(ctx, d, {pne0, 4, 2, 1}, Fill::Zero));
          });
    }
    add(out, Op::Cpy, fmt::format("CPY(type_src={}, type_dst=f32, ne=[6,2]->[4,3])", tn(s)),
        [=](Case& c, Context& ctx) {
          return ops::cpy(ctx, c.leaf(ctx, s, {6, 2, 1, 1}),
                          c.leaf(ctx, DType::F32, {4, 3, 1, 1}, Fill::Zero));
        });
    add(out, Op::Cpy, fmt::format("CPY(type_src={}, type_dst=f16, dst strided view)", tn(s)),
        [=](Case& c, Context& ctx) {
          Tensor* dst = c.leaf(ctx, DType::F16, {8, 6, 1, 1}, Fill::Zero);
          Tensor* view = ops::view(ctx, dst, {3, 6, 1, 1}, dst->nb[1], dst->nb[1] * 6, dst->nb[1] * 6, 2 * 2);
          return ops::cpy(ctx, c.leaf(ctx, s, {3, 6, 1, 1}), view);
        });
  }
  for (DType s : kAllDTypes) {
    if (!is_quantized(s) || !op_source_types(Op::Cpy, 0).contains(s)) continue;
    const int64_t ne0 = std::max<int64_t>(64, traits(s).block_size);
    for (DType d : {DType::F32, DType::F16})
      add(out, Op::Cpy, fmt::format("CPY(type_src={}, type_dst={}, ne=[{},4,1,1])", tn(s), tn(d), ne0),
          [=](Case& c, Context& ctx) {
            return ops::cpy(ctx, c.leaf(ctx, s, {ne0, 4, 1, 1}), c.leaf(ctx, d, {ne0, 4, 1, 1}, Fill::Zero));
          });
  }
  add(out, Op::Cpy, "CPY(type_src=i32, type_dst=i32, ne=[7,3,1,1])", [](Case& c, Context& ctx) {
    return ops::cpy(ctx, c.leaf(ctx, DType::I32, {7, 3, 1, 1}),
                    c.leaf(ctx, DType::I32, {7, 3, 1, 1}, Fill::Zero));
  });
}

void norm_family(std::vector<std::unique_ptr<Case>>& out) {
  const Ne shapes[] = {{64, 5, 4, 3}, {4096, 2, 1, 1}, {5, 7, 11, 13}};
  for (const Ne& ne : shapes) {
    for (float eps : {1e-6f, 1e-5f}) {
      add(out, Op::Norm, fmt::format("NORM(type=f32, ne={}, eps={})", ne_str(ne), eps),
          [=](Case& c, Context& ctx) { return ops::norm(ctx, c.leaf(ctx, DType::F32, ne), eps); });
      add(out, Op::RmsNorm, fmt::format("RMS_NORM(type=f32, ne={}, eps={})", ne_str(ne), eps),
          [=](Case& c, Context& ctx) { return ops::rms_norm(ctx, c.leaf(ctx, DType::F32, ne), eps); });
    }
  }
  add(out, Op::RmsNorm, "RMS_NORM(type=f32, ne=[9,6,2,1], transposed, eps=1e-6)", [](Case& c, Context& ctx) {
    return ops::rms_norm(ctx, transposed_leaf(c, ctx, DType::F32, {9, 6, 2, 1}), 1e-6f);
  });
  add(out, Op::Norm, "NORM(type=f32, ne=[9,6,2,1], transposed, eps=1e-6)", [](Case& c, Context& ctx) {
    return ops::norm(ctx, transposed_leaf(c, ctx, DType::F32, {9, 6, 2, 1}), 1e-6f);
  });
  for (int groups : {1, 2, 3, 4})
    add(out, Op::GroupNorm, fmt::format("GROUP_NORM(type=f32, ne=[8,6,10,2], groups={})", groups),
        [=](Case& c, Context& ctx) {
          return ops::group_norm(ctx, c.leaf(ctx, DType::F32, {8, 6, 10, 2}), groups, 1e-6f);
        });
  for (const Ne& ne : {Ne{10, 5, 4, 3}, Ne{4096, 3, 1, 1}})
    add(out, Op::SumRows, fmt::format("SUM_ROWS(type=f32, ne={})", ne_str(ne)),
        [=](Case& c, Context& ctx) { return ops::sum_rows(ctx, c.leaf(ctx, DType::F32, ne)); });
  add(out, Op::SumRows, "SUM_ROWS(type=f32, ne=[7,5,2,1], transposed)", [](Case& c, Context& ctx) {
    return ops::sum_rows(ctx, transposed_leaf(c, ctx, DType::F32, {7, 5, 2, 1}));
  });
  for (SortOrder order : {SortOrder::Ascending, SortOrder::Descending})
    // 3000 and 5000: rows padded to 4096 and 8192 (a device may sort those outside local memory).
    for (const Ne& ne :
         {Ne{16, 10, 1, 1}, Ne{61, 3, 2, 1}, Ne{1024, 2, 1, 1}, Ne{3000, 2, 1, 1}, Ne{5000, 3, 1, 1}})
      add(out, Op::Argsort,
          fmt::format("ARGSORT(type=f32, ne={}, order={})", ne_str(ne),
                      order == SortOrder::Ascending ? "asc" : "desc"),
          [=](Case& c, Context& ctx) {
            return ops::argsort(ctx, c.leaf(ctx, DType::F32, ne, Fill::UniqueRow), order);
          });
}

void resample_family(std::vector<std::unique_ptr<Case>>& out) {
  add(out, Op::Upscale, "UPSCALE(type=f32, ne=[5,4,3,2]->[10,12,3,2], nearest)", [](Case& c, Context& ctx) {
    return ops::upscale(ctx, c.leaf(ctx, DType::F32, {5, 4, 3, 2}), 10, 12, 3, 2, 0);
  });
  add(out, Op::Upscale, "UPSCALE(type=f32, ne=[8,6,2,1]->[5,4,3,1], nearest)", [](Case& c, Context& ctx) {
    return ops::upscale(ctx, c.leaf(ctx, DType::F32, {8, 6, 2, 1}), 5, 4, 3, 1, 0);
  });
  add(out, Op::Upscale, "UPSCALE(type=f32, ne=[5,4,3,1]->[9,7,3,1], bilinear)", [](Case& c, Context& ctx) {
    return ops::upscale(ctx, c.leaf(ctx, DType::F32, {5, 4, 3, 1}), 9, 7, 3, 1, 1);
  });
  add(out, Op::Upscale, "UPSCALE(type=f32, ne=[5,4,3,1]->[9,7,3,1], bilinear align-corners)",
      [](Case& c, Context& ctx) {
        return ops::upscale(ctx, c.leaf(ctx, DType::F32, {5, 4, 3, 1}), 9, 7, 3, 1, 1 | (1 << 8));
      });
  add(out, Op::Pad, "PAD(type=f32, ne=[5,4,3,2], pads=[1,2,0,3,1,0,0,1])", [](Case& c, Context& ctx) {
    return ops::pad(ctx, c.leaf(ctx, DType::F32, {5, 4, 3, 2}), {1, 2, 0, 3, 1, 0, 0, 1}, false);
  });
  add(out, Op::Pad, "PAD(type=f32, ne=[5,4,3,2], pads=[2,1,1,2,0,0,0,0], circular)",
      [](Case& c, Context& ctx) {
        return ops::pad(ctx, c.leaf(ctx, DType::F32, {5, 4, 3, 2}), {2, 1, 1, 2, 0, 0, 0, 0}, true);
      });
  add(out, Op::Arange, "ARANGE(type=f32, start=-3, stop=7.5, step=0.75)",
      [](Case&, Context& ctx) { return ops::arange(ctx, -3.0f, 7.5f, 0.75f); });
  for (int dim : {64, 33})
    add(out, Op::TimestepEmbedding,
        fmt::format("TIMESTEP_EMBEDDING(type=f32, n=7, dim={}, max_period=10000)", dim),
        [=](Case& c, Context& ctx) {
          return ops::timestep_embedding(ctx, c.leaf(ctx, DType::F32, {7, 1, 1, 1}), dim, 10000);
        });
  // IM2COL 1-D and 2-D, f16/f32 results.
  for (DType dst : {DType::F32, DType::F16}) {
    for (DType in : {DType::F32, DType::F16}) {
      add(out, Op::Im2Col,
          fmt::format("IM2COL(type={}, type_in={}, 2d, in=[10,9,3,2], k=[3,3], s=2,1, p=1,0, d=1,2)", tn(dst),
                      tn(in)),
          [=](Case& c, Context& ctx) {
            return ops::im2col(ctx, c.leaf(ctx, DType::F16, {3, 3, 3, 4}), c.leaf(ctx, in, {10, 9, 3, 2}), 2,
                               1, 1, 0, 1, 2, true, dst);
          });
      add(out, Op::Im2Col,
          fmt::format("IM2COL(type={}, type_in={}, 1d, in=[20,4,2], k=5, s=3, p=2, d=1)", tn(dst), tn(in)),
          [=](Case& c, Context& ctx) {
            return ops::im2col(ctx, c.leaf(ctx, DType::F16, {5, 4, 6, 1}), c.leaf(ctx, in, {20, 4, 2, 1}), 3,
                               0, 2, 0, 1, 0, false, dst);
          });
    }
  }
  for (PoolOp op : {PoolOp::Max, PoolOp::Avg})
    for (int p : {0, 1})
      add(out, Op::Pool2D,
          fmt::format("POOL_2D(type=f32, op={}, ne=[11,9,3,2], k=3x2, s=2x2, p={})",
                      op == PoolOp::Max ? "max" : "avg", p),
          [=](Case& c, Context& ctx) {
            return ops::pool_2d(ctx, c.leaf(ctx, DType::F32, {11, 9, 3, 2}), op, 3, 2, 2, 2, p, p);
          });
}

void attention_family(std::vector<std::unique_ptr<Case>>& out) {
  for (int n_past : {0, 3})
    add(out, Op::DiagMaskInf, fmt::format("DIAG_MASK_INF(type=f32, ne=[10,6,3,1], n_past={})", n_past),
        [=](Case& c, Context& ctx) {
          return ops::diag_mask_inf(ctx, c.leaf(ctx, DType::F32, {10, 6, 3, 1}), n_past);
        });
  const Ne shapes[] = {{16, 8, 4, 1}, {33, 5, 6, 2}, {1024, 3, 2, 1}};
  for (const Ne& ne : shapes) {
    add(out, Op::SoftMax, fmt::format("SOFT_MAX(type=f32, ne={}, scale=1)", ne_str(ne)),
        [=](Case& c, Context& ctx) { return ops::soft_max(ctx, c.leaf(ctx, DType::F32, ne)); });
    for (DType mt : {DType::F32, DType::F16})
      for (float max_bias : {0.0f, 8.0f})
        add(out, Op::SoftMax,
            fmt::format("SOFT_MAX(type=f32, ne={}, mask={}, scale=0.125, max_bias={})", ne_str(ne), tn(mt),
                        max_bias),
            [=](Case& c, Context& ctx) {
              Tensor* a = c.leaf(ctx, DType::F32, ne);
              Tensor* mask = c.leaf(ctx, mt, {ne[0], ne[1] + 2, 1, 1});
              return ops::soft_max(ctx, a, mask, 0.125f, max_bias);
            });
    // Attention sinks: one logit per head joining each row's denominator (gpt-oss).
    add(out, Op::SoftMax, fmt::format("SOFT_MAX(type=f32, ne={}, mask=f16, scale=0.125, sinks)", ne_str(ne)),
        [=](Case& c, Context& ctx) {
          Tensor* a = c.leaf(ctx, DType::F32, ne);
          Tensor* mask = c.leaf(ctx, DType::F16, {ne[0], ne[1], 1, 1});
          Tensor* sinks = c.leaf(ctx, DType::F32, {ne[2], 1, 1, 1});
          return ops::soft_max(ctx, a, mask, 0.125f, 0.0f, sinks);
        });
  }
  // ROPE: both modes, partial rotation, YaRN, freq factors, f16.
  for (DType t : {DType::F32, DType::F16}) {
    for (RopeMode mode : {RopeMode::Normal, RopeMode::Neox}) {
      for (int variant = 0; variant < 4; ++variant) {
        const bool yarn = variant & 1, ff = variant & 2;
        const int n_dims = variant == 0 ? 64 : 48;
        add(out, Op::Rope,
            fmt::format("ROPE(type={}, ne=[64,5,7,2], mode={}, n_dims={}, yarn={}, freq_factors={})", tn(t),
                        mode == RopeMode::Normal ? "normal" : "neox", n_dims, yarn, ff),
            [=](Case& c, Context& ctx) {
              ops::RopeParams p;
              p.n_dims = n_dims;
              p.mode = mode;
              p.n_ctx_orig = 512;
              p.freq_base = 10000.0f;
              if (yarn) {
                p.freq_scale = 0.25f;
                p.ext_factor = 1.0f;
                p.attn_factor = 1.0f;
              }
              Tensor* a = c.leaf(ctx, t, {64, 5, 7, 2});
              Tensor* pos = c.leaf(ctx, DType::I32, {7, 1, 1, 1}, Fill::Positions, 2048);
              Tensor* factors = ff ? c.leaf(ctx, DType::F32, {n_dims / 2, 1, 1, 1}, Fill::NearOne) : nullptr;
              return ops::rope(ctx, a, pos, factors, p);
            });
      }
    }
  }
}

// FLASH_ATTN_EXT as the model graphs use it, and around it: F16 K/V (the cache's type) and F32,
// grouped query heads, masks of both types with -inf cells (a causal mask made in the graph) or
// none, ALiBi, soft-capping, batches, a V view transposed as our KV cache stores it, and cell
// counts that are no multiple of the fast kernel's block; attention sinks (gpt-oss) on each CPU
// strategy: the composed ops (V transposed), the online softmax (V rows, or asked for).
void flash_attn_family(std::vector<std::unique_ptr<Case>>& out) {
  struct Shape {
    int64_t d, n_kv, n_q, heads, kv_heads, batch;
  };
  const Shape shapes[] = {
      {64, 256, 1, 8, 2, 1}, {64, 100, 7, 4, 4, 1}, {128, 513, 32, 4, 1, 1}, {40, 70, 3, 6, 3, 2}};
  for (const Shape& sh : shapes) {
    for (DType kv : {DType::F16, DType::F32}) {
      for (int variant = 0; variant < 8; ++variant) {
        // 0: causal f16 mask; 1: f32 mask with ALiBi; 2: no mask; 3: softcap, causal f16 mask;
        // 4: V transposed (the KV cache's layout), causal f32 mask; 5: sinks, V transposed, causal
        // f16 mask; 6: sinks, no mask; 7: sinks, V transposed, causal f16 mask, online softmax.
        const bool causal = variant == 0 || variant == 3 || variant == 4 || variant == 5 || variant == 7;
        const bool transposed = variant == 4 || variant == 5 || variant == 7;
        const bool sinks = variant >= 5, online = variant == 7;
        const DType mt = variant == 1 || variant == 4 ? DType::F32 : DType::F16;
        const float max_bias = variant == 1 ? 8.0f : 0.0f, softcap = variant == 3 ? 20.0f : 0.0f;
        const float scale = variant == 3 ? 1.0f : 1.0f / std::sqrt(static_cast<float>(sh.d));
        const char* what[] = {"causal f16 mask",
                              "f32 mask, max_bias=8",
                              "no mask",
                              "softcap=20, causal f16 mask",
                              "V transposed, causal f32 mask",
                              "sinks, V transposed, causal f16 mask",
                              "sinks, no mask",
                              "sinks, V transposed, causal f16 mask, online softmax"};
        add(out, Op::FlashAttnExt,
            fmt::format("FLASH_ATTN_EXT(type_kv={}, d={}, n_kv={}, n_q={}, heads={}/{}, batch={}, {})",
                        tn(kv), sh.d, sh.n_kv, sh.n_q, sh.heads, sh.kv_heads, sh.batch, what[variant]),
            [=](Case& c, Context& ctx) {
              Tensor* q = c.leaf(ctx, DType::F32, {sh.d, sh.n_q, sh.heads, sh.batch});
              Tensor* k = c.leaf(ctx, kv, {sh.d, sh.n_kv, sh.kv_heads, sh.batch});
              Tensor* v = transposed
                              ? ops::transpose(ctx, c.leaf(ctx, kv, {sh.n_kv, sh.d, sh.kv_heads, sh.batch}))
                              : c.leaf(ctx, kv, {sh.d, sh.n_kv, sh.kv_heads, sh.batch});
              Tensor* mask = nullptr;
              if (variant != 2 && variant != 6) {
                // Two rows more than the queries, as padded masks have them.
                mask = c.leaf(ctx, DType::F32, {sh.n_kv, sh.n_q + 2, 1, 1});
                if (causal) mask = ops::diag_mask_inf(ctx, mask, static_cast<int>(sh.n_kv - sh.n_q));
                if (mt == DType::F16)
                  mask =
                      ops::cpy(ctx, mask, c.leaf(ctx, DType::F16, {sh.n_kv, sh.n_q + 2, 1, 1}, Fill::Zero));
              }
              Tensor* s = sinks ? c.leaf(ctx, DType::F32, {sh.heads, 1, 1, 1}) : nullptr;
              return ops::flash_attn_ext(ctx, q, k, v, mask, scale, max_bias, softcap, online, s);
            });
      }
    }
  }
}

// The views the model builders make of fused projections (src/llm/blocks.cpp): heads of one part
// of a fused QKV row (a row stride beyond ne0 and an offset), and the two halves of a fused
// gate+up row, read by ROPE, UNARY, MUL and CPY.
void fused_view_family(std::vector<std::unique_ptr<Case>>& out) {
  // QKV rows of 4 Q heads, 2 K heads and 2 V heads of 64, 7 tokens.
  constexpr int64_t kHead = 64, kTokens = 7, kRow = kHead * 8;
  auto qkv_view = [](Context& ctx, Tensor* qkv, int64_t heads, int64_t first_head) {
    const size_t row = qkv->nb[1];
    return ops::view(ctx, qkv, {kHead, heads, kTokens, 1}, kHead * sizeof(float), row, row * kTokens,
                     static_cast<size_t>(first_head * kHead) * sizeof(float));
  };
  for (RopeMode mode : {RopeMode::Normal, RopeMode::Neox})
    add(out, Op::Rope,
        fmt::format("ROPE(type=f32, ne=[64,2,7,1], mode={}, K heads of a fused QKV row at offset 256)",
                    mode == RopeMode::Normal ? "normal" : "neox"),
        [=](Case& c, Context& ctx) {
          ops::RopeParams p;
          p.n_dims = kHead;
          p.mode = mode;
          Tensor* qkv = c.leaf(ctx, DType::F32, {kRow, kTokens, 1, 1});
          Tensor* pos = c.leaf(ctx, DType::I32, {kTokens, 1, 1, 1}, Fill::Positions, 2048);
          return ops::rope(ctx, qkv_view(ctx, qkv, 2, 4), pos, nullptr, p);
        });
  add(out, Op::Cpy, "CPY(type_src=f32, type_dst=f16, V rows of a fused QKV row transposed into a cache view)",
      [=](Case& c, Context& ctx) {
        Tensor* qkv = c.leaf(ctx, DType::F32, {kRow, kTokens, 1, 1});
        Tensor* v = ops::view(ctx, qkv, {2 * kHead, kTokens, 1, 1}, qkv->nb[1], qkv->nb[1] * kTokens,
                              qkv->nb[1] * kTokens, 6 * kHead * sizeof(float));
        Tensor* cache = c.leaf(ctx, DType::F16, {16, 2 * kHead, 1, 1}, Fill::Zero);
        Tensor* dst = ops::view(ctx, cache, {kTokens, 2 * kHead, 1, 1}, cache->nb[1],
                                cache->nb[1] * 2 * kHead, cache->nb[1] * 2 * kHead, 3 * sizeof(uint16_t));
        return ops::cpy(ctx, ops::transpose(ctx, v), dst);
      });
  // Gate and up halves of a fused [2 n_ff, tokens] projection.
  constexpr int64_t kFf = 48;
  auto half = [](Context& ctx, Tensor* both, int64_t which) {
    const size_t row = both->nb[1];
    return ops::view(ctx, both, {kFf, both->ne[1], 1, 1}, row, row * both->ne[1], row * both->ne[1],
                     static_cast<size_t>(which * kFf) * sizeof(float));
  };
  for (UnaryOp uop : {UnaryOp::Silu, UnaryOp::Gelu})
    add(out, Op::Unary,
        fmt::format("UNARY(op={}, type=f32, ne=[48,5,1,1], first half of fused rows)", unary_op_name(uop)),
        [=](Case& c, Context& ctx) {
          return ops::unary(ctx, half(ctx, c.leaf(ctx, DType::F32, {2 * kFf, 5, 1, 1}), 0), uop);
        });
  add(out, Op::Mul, "MUL(type_a=f32, type_b=f32, ne=[48,5,1,1], a and b halves of fused rows)",
      [=](Case& c, Context& ctx) {
        Tensor* both = c.leaf(ctx, DType::F32, {2 * kFf, 5, 1, 1}, Fill::NearOne);
        return ops::mul(ctx, half(ctx, both, 0), half(ctx, both, 1));
      });
}

void mul_mat_family(std::vector<std::unique_ptr<Case>>& out) {
  auto mm = [&](DType ta, int64_t k, int64_t m, int64_t n, Ne batch_a, Ne batch_b, bool permuted_b,
                DType tb = DType::F32, bool a_view = false) {
    const double flops = 2.0 * k * m * n * batch_b[2] * batch_b[3];
    add(
        out, Op::MulMat,
        fmt::format("MUL_MAT(type_a={}, type_b={}, m={}, n={}, k={}, bs=[{},{}], nr=[{},{}]{}{})", tn(ta),
                    tn(tb), m, n, k, batch_a[2], batch_a[3], batch_b[2] / batch_a[2], batch_b[3] / batch_a[3],
                    permuted_b ? ", b permuted" : "", a_view ? ", a a view of rows 3.." : ""),
        [=](Case& c, Context& ctx) {
          Tensor* a;
          if (a_view) {  // rows [3, 3 + m) of a larger weight
            Tensor* base = c.leaf(ctx, ta, {k, m + 5, batch_a[2], batch_a[3]});
            a = ops::view(ctx, base, {k, m, batch_a[2], batch_a[3]}, base->nb[1], base->nb[2], base->nb[3],
                          3 * base->nb[1]);
          } else {
            a = c.leaf(ctx, ta, {k, m, batch_a[2], batch_a[3]});
          }
          Tensor* b;
          if (permuted_b) {
            Tensor* base = c.leaf(ctx, tb, {k, batch_b[2], n, batch_b[3]});
            b = ops::permute(ctx, base, 0, 2, 1, 3);
          } else {
            b = c.leaf(ctx, tb, {k, n, batch_b[2], batch_b[3]});
          }
          return ops::mul_mat(ctx, a, b);
        },
        flops);
  };
  for (DType ta : kAllDTypes) {
    if (!op_source_types(Op::MulMat, 0).contains(ta)) continue;
    // K a multiple of the type's block (256 for the K-quants and IQ4_XS).
    const int64_t bs = traits(ta).block_size;
    auto fit = [bs](int64_t k) { return std::max<int64_t>(bs, (k + bs - 1) / bs * bs); };
    const bool super = bs == 256;
    for (int64_t k : {super ? 256 : 32, super ? 512 : 256})
      for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 33})
        for (int64_t n : {1, 2, 5, 9, 16, 32, 33})
          if ((m * 7 + n * 3 + k) % 3 == 0 || m == 1 || n == 1)  // a spread of the grid, not all of it
            mm(ta, k, m, n, {1, 1, 1, 1}, {1, 1, 1, 1}, false);
    mm(ta, 4096, 32, 1, {1, 1, 1, 1}, {1, 1, 1, 1}, false);
    mm(ta, 4096, 16, 33, {1, 1, 1, 1}, {1, 1, 1, 1}, false);
    mm(ta, fit(128), 127, 512, {1, 1, 1, 1}, {1, 1, 1, 1}, false);
    mm(ta, fit(64), 512, 9, {1, 1, 1, 1}, {1, 1, 1, 1}, false);
    if (super) {  // K-ranges split at 256: long rows in several cache blocks, odd M and N
      mm(ta, 2816, 37, 11, {1, 1, 1, 1}, {1, 1, 1, 1}, false);
      mm(ta, 1280, 9, 7, {1, 1, 1, 1}, {1, 1, 1, 1}, false, DType::F32, true);
    } else if (is_quantized(ta)) {
      mm(ta, 96, 9, 7, {1, 1, 1, 1}, {1, 1, 1, 1}, false, DType::F32, true);
    }
    for (int r2 : {1, 2, 3})
      for (int r3 : {1, 2}) mm(ta, fit(64), 16, 7, {1, 1, 2, 1}, {1, 1, 2 * r2, r3}, false);
    mm(ta, fit(64), 10, 6, {1, 1, 2, 1}, {1, 1, 4, 1}, true);
    mm(ta, fit(64), 10, 1, {1, 1, 3, 1}, {1, 1, 3, 1}, true);
    // Batches wide enough for a device's GEMM path (OpenCL switches at N = 96..512), stretched and
    // permuted; and f16 b on both sides of the switch.
    mm(ta, fit(64), 16, 520, {1, 1, 2, 1}, {1, 1, 4, 2}, false);
    mm(ta, fit(96), 10, 520, {1, 1, 2, 1}, {1, 1, 4, 1}, true);
    for (int64_t n : {1, 7, 520}) mm(ta, fit(64), 12, n, {1, 1, 1, 1}, {1, 1, 1, 1}, false, DType::F16);
    mm(ta, fit(64), 12, 5, {1, 1, 2, 1}, {1, 1, 2, 1}, true, DType::F16);
  }
}

// MUL_MAT_ID: n_as experts, n_used of them per token (ids random, repeats allowed), b shared by the
// slots (b1 = 1, as the gate and up projections of an MoE layer read it) or one row per slot (the
// down projection); ids a view of wider rows, as the routing's top-k slice of ARGSORT is.
void mul_mat_id_family(std::vector<std::unique_ptr<Case>>& out) {
  auto mmid = [&](DType ta, int64_t k, int64_t m, int64_t n_as, int64_t n_used, int64_t tokens, int64_t b1,
                  DType tb = DType::F32, bool ids_view = false) {
    const double flops = 2.0 * k * m * n_used * tokens;
    add(
        out, Op::MulMatId,
        fmt::format("MUL_MAT_ID(type_a={}, type_b={}, m={}, k={}, n_as={}, n_used={}, tokens={}, b1={}{})",
                    tn(ta), tn(tb), m, k, n_as, n_used, tokens, b1, ids_view ? ", ids a view" : ""),
        [=](Case& c, Context& ctx) {
          Tensor* as = c.leaf(ctx, ta, {k, m, n_as, 1});
          Tensor* b = c.leaf(ctx, tb, {k, b1, tokens, 1});
          Tensor* ids;
          if (ids_view) {
            Tensor* wide = c.leaf(ctx, DType::I32, {n_used + 3, tokens, 1, 1}, Fill::Indices, n_as);
            ids = ops::view(ctx, wide, {n_used, tokens, 1, 1}, wide->nb[1], wide->nb[2], wide->nb[3], 0);
          } else {
            ids = c.leaf(ctx, DType::I32, {n_used, tokens, 1, 1}, Fill::Indices, n_as);
          }
          return ops::mul_mat_id(ctx, as, b, ids);
        },
        flops);
  };
  for (DType ta : kAllDTypes) {
    if (!op_source_types(Op::MulMatId, 0).contains(ta)) continue;
    const int64_t bs = traits(ta).block_size;
    const int64_t k = std::max<int64_t>(bs, 64), k2 = bs == 256 ? 512 : 96;
    for (int64_t tokens : {1, 5, 33}) {
      mmid(ta, k, 16, 4, 2, tokens, 1);
      mmid(ta, k2, 33, 8, 4, tokens, 4);
    }
    mmid(ta, k, 9, 8, 8, 7, 1, DType::F32, true);
    mmid(ta, k, 20, 64, 8, 70, 1);  // more tokens than experts: each expert's rows read once for many
    mmid(ta, k, 12, 4, 2, 9, 2, DType::F16);
  }
}

// Batch invariance: a row computed alone equals the same row inside batches of 7 and 33.
void batch_family(std::vector<std::unique_ptr<Case>>& out) {
  auto add_batch = [&](Op op, const std::string& what, int64_t rows,
                       std::function<Tensor*(Case&, Context&, Tensor * input)> apply,
                       std::function<Tensor*(Case&, Context&, int64_t rows)> make_input) {
    out.push_back(std::make_unique<BatchCase>(
        op, fmt::format("{}(batch invariance, {}, rows={})", op_name(op), what, rows),
        [=](Case& c, Context& ctx, int64_t, Tensor** batch_out,
            std::vector<std::pair<Tensor*, Tensor*>>& pairs) {
          Tensor* input = make_input(c, ctx, rows);
          Tensor* batch = apply(c, ctx, input);
          *batch_out = batch;
          for (int64_t r : {int64_t{0}, rows / 2, rows - 1}) {
            Tensor* alone = ops::cont(ctx, apply(c, ctx, row_view(ctx, input, r)));
            pairs.push_back({ops::cont(ctx, row_view(ctx, batch, r)), alone});
          }
          return batch;
        }));
  };
  for (int64_t rows : {7, 33}) {
    for (DType ta : kAllDTypes) {
      if (ta == DType::BF16 || !op_source_types(Op::MulMat, 0).contains(ta)) continue;
      // The weights are shared by every application, so build them once per graph.
      auto weights = std::make_shared<std::map<Context*, Tensor*>>();
      add_batch(
          Op::MulMat, fmt::format("type_a={}, m=64, k=256", tn(ta)), rows,
          [=](Case& c, Context& ctx, Tensor* x) {
            auto& w = (*weights)[&ctx];
            if (w == nullptr) w = c.leaf(ctx, ta, {256, 64, 1, 1});
            return ops::mul_mat(ctx, w, x);
          },
          [=](Case& c, Context& ctx, int64_t n) {
            weights->erase(&ctx);
            return c.leaf(ctx, DType::F32, {256, n, 1, 1});
          });
    }
    for (DType ta : {DType::F32, DType::F16, DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
      // MoE routing as the models do it: each row's top 2 of its first 4 values pick its experts.
      auto weights = std::make_shared<std::map<Context*, Tensor*>>();
      add_batch(
          Op::MulMatId, fmt::format("type_a={}, m=64, k=256, 4 experts, 2 used", tn(ta)), rows,
          [=](Case& c, Context& ctx, Tensor* x) {
            auto& w = (*weights)[&ctx];
            if (w == nullptr) w = c.leaf(ctx, ta, {256, 64, 4, 1});
            const int64_t n = x->ne[1];
            Tensor* xc = ops::cont(ctx, x);
            Tensor* logits =
                ops::cont(ctx, ops::view(ctx, xc, {4, n, 1, 1}, xc->nb[1], xc->nb[2], xc->nb[3], 0));
            Tensor* order = ops::argsort(ctx, logits, SortOrder::Descending);
            Tensor* ids = ops::view(ctx, order, {2, n, 1, 1}, order->nb[1], order->nb[2], order->nb[3], 0);
            Tensor* y = ops::mul_mat_id(ctx, w, ops::reshape(ctx, xc, 256, 1, n), ids);
            return ops::reshape(ctx, y, 64 * 2, n);
          },
          [=](Case& c, Context& ctx, int64_t n) {
            weights->erase(&ctx);
            return c.leaf(ctx, DType::F32, {256, n, 1, 1});
          });
    }
    add_batch(
        Op::SoftMax, "ne0=100", rows,
        [](Case&, Context& ctx, Tensor* x) { return ops::soft_max(ctx, x, nullptr, 0.5f); },
        [](Case& c, Context& ctx, int64_t n) {
          return c.leaf(ctx, DType::F32, {100, n, 1, 1});
        });
    add_batch(
        Op::RmsNorm, "ne0=4096", rows,
        [](Case&, Context& ctx, Tensor* x) { return ops::rms_norm(ctx, x, 1e-5f); },
        [](Case& c, Context& ctx, int64_t n) {
          return c.leaf(ctx, DType::F32, {4096, n, 1, 1});
        });
    {
      auto pos = std::make_shared<std::map<Context*, Tensor*>>();
      add_batch(
          Op::Rope, "ne0=64, one head", rows,
          [=](Case& c, Context& ctx, Tensor* x) {
            // Rope over [64, 1, rows] needs positions per row: use a [64,1,T] reshape of x.
            ops::RopeParams p;
            p.n_dims = 64;
            Tensor* x3 = ops::reshape(ctx, ops::cont(ctx, x), 64, 1, x->ne[1]);
            auto& all = (*pos)[&ctx];
            if (all == nullptr) all = c.leaf(ctx, DType::I32, {1, 1, 1, 1}, Fill::Positions, 1000);
            // Every row sits at the same (random) position, alone or in the batch.
            Tensor* positions =
                ops::repeat(ctx, all, c.leaf(ctx, DType::I32, {x->ne[1], 1, 1, 1}, Fill::Zero));
            return ops::reshape(ctx, ops::rope(ctx, x3, positions, nullptr, p), 64, x->ne[1]);
          },
          [=](Case& c, Context& ctx, int64_t n) {
            pos->erase(&ctx);
            return c.leaf(ctx, DType::F32, {64, n, 1, 1});
          });
    }
    for (DType ts : kAllDTypes) {
      if (!is_quantized(ts) || !op_source_types(Op::GetRows, 0).contains(ts)) continue;
      const int64_t ne0 = std::max<int64_t>(64, traits(ts).block_size);
      auto src = std::make_shared<std::map<Context*, Tensor*>>();
      add_batch(
          Op::GetRows, fmt::format("type={}, ne0={}", tn(ts), ne0), rows,
          [=](Case& c, Context& ctx, Tensor* idx) {
            auto& s = (*src)[&ctx];
            if (s == nullptr) s = c.leaf(ctx, ts, {ne0, 50, 1, 1});
            return ops::get_rows(ctx, s, ops::reshape(ctx, ops::cont(ctx, idx), idx->ne[0] * idx->ne[1]));
          },
          [=](Case& c, Context& ctx, int64_t n) {
            src->erase(&ctx);
            return c.leaf(ctx, DType::I32, {1, n, 1, 1}, Fill::Indices, 50);
          });
    }
  }
}

}  // namespace

std::vector<std::unique_ptr<Case>> all_cases() {
  std::vector<std::unique_ptr<Case>> out;
  shape_family(out);
  binary_family(out);
  unary_family(out);
  gpt_oss_family(out);
  norm_family(out);
  resample_family(out);
  attention_family(out);
  flash_attn_family(out);
  fused_view_family(out);
  mul_mat_family(out);
  mul_mat_id_family(out);
  batch_family(out);
  return out;
}

}  // namespace tessera::conformance
