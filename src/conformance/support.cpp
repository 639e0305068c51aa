// The op x type support matrix, from a backend's own supports() answers.
#include <fmt/format.h>

#include "conformance/harness.h"
#include "tessera/error.h"
#include "tessera/ops.h"

namespace tessera::conformance {
namespace {

struct Row {
  std::string label;
  std::function<Tensor*(Context&, DType)> build;  // throws Error for a type the op does not take
};

std::vector<Row> rows() {
  auto t2 = [](Context& ctx, DType t, int64_t ne0 = 64, int64_t ne1 = 4) {
    return ctx.new_tensor(t, ne0, ne1);
  };
  auto f32 = [](Context& ctx, int64_t ne0 = 64, int64_t ne1 = 4) {
    return ctx.new_tensor(DType::F32, ne0, ne1);
  };
  std::vector<Row> r;
  r.push_back({"DUP", [=](Context& c, DType t) { return ops::dup(c, t2(c, t)); }});
  r.push_back({"CONT", [=](Context& c, DType t) { return ops::cont(c, t2(c, t)); }});
  r.push_back({"CPY (f32 -> type)", [=](Context& c, DType t) { return ops::cpy(c, f32(c), t2(c, t)); }});
  r.push_back({"CPY (type -> f32)", [=](Context& c, DType t) { return ops::cpy(c, t2(c, t), f32(c)); }});
  r.push_back({"REPEAT", [=](Context& c, DType t) { return ops::repeat(c, t2(c, t, 64, 1), f32(c)); }});
  r.push_back({"GET_ROWS",
               [=](Context& c, DType t) { return ops::get_rows(c, t2(c, t), c.new_tensor(DType::I32, 3)); }});
  r.push_back({"CONCAT", [=](Context& c, DType t) { return ops::concat(c, t2(c, t), t2(c, t), 1); }});
  for (Op op : {Op::Add, Op::Mul, Op::Div}) {
    r.push_back({std::string(op_name(op)) + " (b same type)", [=](Context& c, DType t) {
                   return op == Op::Add   ? ops::add(c, t2(c, t), t2(c, t))
                          : op == Op::Mul ? ops::mul(c, t2(c, t), t2(c, t))
                                          : ops::div(c, t2(c, t), t2(c, t));
                 }});
    r.push_back({std::string(op_name(op)) + " (b f32)", [=](Context& c, DType t) {
                   return op == Op::Add   ? ops::add(c, t2(c, t), f32(c))
                          : op == Op::Mul ? ops::mul(c, t2(c, t), f32(c))
                                          : ops::div(c, t2(c, t), f32(c));
                 }});
  }
  r.push_back({"ACC", [=](Context& c, DType t) {
                 Tensor* a = t2(c, t);
                 return ops::acc(c, a, t2(c, t, 8, 2), a->nb[1], a->nb[2], a->nb[3], 0);
               }});
  for (int u = 0; u < kUnaryOpCount; ++u) {
    const auto uop = static_cast<UnaryOp>(u);
    r.push_back({std::string("UNARY ") + std::string(unary_op_name(uop)),
                 [=](Context& c, DType t) { return ops::unary(c, t2(c, t), uop); }});
  }
  r.push_back({"LEAKY_RELU", [=](Context& c, DType t) { return ops::leaky_relu(c, t2(c, t), 0.1f); }});
  r.push_back({"SCALE", [=](Context& c, DType t) { return ops::scale(c, t2(c, t), 2.0f); }});
  r.push_back({"SQR", [=](Context& c, DType t) { return ops::sqr(c, t2(c, t)); }});
  r.push_back({"CLAMP", [=](Context& c, DType t) { return ops::clamp(c, t2(c, t), -1.0f, 1.0f); }});
  r.push_back({"NORM", [=](Context& c, DType t) { return ops::norm(c, t2(c, t), 1e-5f); }});
  r.push_back({"RMS_NORM", [=](Context& c, DType t) { return ops::rms_norm(c, t2(c, t), 1e-5f); }});
  r.push_back({"GROUP_NORM",
               [=](Context& c, DType t) { return ops::group_norm(c, c.new_tensor(t, 64, 4, 4), 2, 1e-5f); }});
  r.push_back({"UPSCALE", [=](Context& c, DType t) { return ops::upscale(c, t2(c, t), 128, 8, 1, 1); }});
  r.push_back({"PAD", [=](Context& c, DType t) {
                 return ops::pad(c, t2(c, t), {32, 32, 1, 1, 0, 0, 0, 0});
               }});
  r.push_back({"ARANGE", [=](Context& c, DType t) {
                 if (t != DType::F32) throw Error(ErrorCode::InvalidArgument, "ARANGE: f32 only");
                 return ops::arange(c, 0.0f, 10.0f, 1.0f);
               }});
  r.push_back({"TIMESTEP_EMBEDDING", [=](Context& c, DType t) {
                 return ops::timestep_embedding(c, c.new_tensor(t, 4), 16, 10000);
               }});
  r.push_back({"MUL_MAT (b f32)", [=](Context& c, DType t) { return ops::mul_mat(c, t2(c, t), f32(c)); }});
  r.push_back({"DIAG_MASK_INF", [=](Context& c, DType t) { return ops::diag_mask_inf(c, t2(c, t), 0); }});
  r.push_back({"SOFT_MAX", [=](Context& c, DType t) { return ops::soft_max(c, t2(c, t)); }});
  r.push_back({"SOFT_MAX (mask of type)",
               [=](Context& c, DType t) { return ops::soft_max(c, f32(c), t2(c, t), 0.5f, 0.0f); }});
  r.push_back({"ROPE", [=](Context& c, DType t) {
                 ops::RopeParams p;
                 p.n_dims = 64;
                 return ops::rope(c, c.new_tensor(t, 64, 2, 3), c.new_tensor(DType::I32, 3), nullptr, p);
               }});
  r.push_back({"IM2COL (result of type)", [=](Context& c, DType t) {
                 return ops::im2col(c, c.new_tensor(DType::F16, 3, 3, 2, 2),
                                    c.new_tensor(DType::F32, 8, 8, 2, 1), 1, 1, 0, 0, 1, 1, true, t);
               }});
  r.push_back({"POOL_2D", [=](Context& c, DType t) {
                 return ops::pool_2d(c, c.new_tensor(t, 8, 8, 2, 1), PoolOp::Max, 2, 2, 2, 2, 0, 0);
               }});
  r.push_back({"SUM_ROWS", [=](Context& c, DType t) { return ops::sum_rows(c, t2(c, t)); }});
  r.push_back(
      {"ARGSORT", [=](Context& c, DType t) { return ops::argsort(c, t2(c, t), SortOrder::Ascending); }});
  return r;
}

}  // namespace

std::string support_table(const Target& target) {
  auto backend = target.make_backend();
  std::string out = fmt::format("| {} op |", target.name);
  std::string rule = "| --- |";
  for (DType t : kAllDTypes) {
    out += fmt::format(" {} |", name(t));
    rule += " :-: |";
  }
  out += "\n" + rule + "\n";
  for (const Row& row : rows()) {
    out += "| " + row.label + " |";
    for (DType t : kAllDTypes) {
      Context ctx;
      const char* cell = " |";
      try {
        Tensor* node = row.build(ctx, t);
        cell = backend->supports(*node) ? " yes |" : " no |";
      } catch (const Error&) {
        cell = " |";  // the op does not take this type (OPS.md)
      }
      out += cell;
    }
    out += "\n";
  }
  return out;
}

}  // namespace tessera::conformance
