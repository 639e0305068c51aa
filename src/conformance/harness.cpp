#include "conformance/harness.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/check.h"
#include "tessera/buffer.h"
#include "tessera/cpu.h"
#include "tessera/graph.h"
#include "tessera/quant.h"

namespace tessera::conformance {
namespace {

constexpr size_t kGuardBytes = 256;
constexpr uint8_t kGuardByte = 0xA5;

size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// Every tensor of the graph that owns memory (leafs, and nodes that are not views), placed one after
// another with a guard region after each.
struct Placement {
  std::unique_ptr<Buffer> buffer;
  Context guards_ctx;
  std::vector<std::pair<const Tensor*, Tensor*>> guards;  // tensor -> descriptor over its guard bytes
};

std::vector<Tensor*> owners(const Graph& g) {
  std::vector<Tensor*> all;
  for (Tensor* t : g.leafs())
    if (t->view_src == nullptr) all.push_back(t);
  for (Tensor* t : g.nodes())
    if (t->view_src == nullptr) all.push_back(t);
  return all;
}

void place(const Graph& g, BufferType& type, Placement& p) {
  const auto tensors = owners(g);
  const size_t align = type.alignment();
  size_t total = 0;
  std::vector<size_t> offsets;
  for (const Tensor* t : tensors) {
    offsets.push_back(total);
    total = align_up(total + type.alloc_size(*t), align);
    total = align_up(total + kGuardBytes, align);
  }
  p.buffer = type.allocate(std::max<size_t>(total, align));
  p.buffer->clear(kGuardByte);
  for (size_t i = 0; i < tensors.size(); ++i) {
    Tensor* t = tensors[i];
    p.buffer->place(*t, offsets[i]);
    Tensor* guard = p.guards_ctx.new_tensor(DType::F32, static_cast<int64_t>(kGuardBytes / 4));
    p.buffer->place(*guard, align_up(offsets[i] + type.alloc_size(*t), align));
    p.guards.push_back({t, guard});
  }
  for (Tensor* t : g.leafs()) resolve_view_data(*t);
  for (Tensor* t : g.nodes()) resolve_view_data(*t);
}

// The ggml byte image of a leaf's initial value.
std::vector<char> make_leaf_data(const Case::LeafSpec& spec, std::mt19937& rng) {
  const Tensor& t = *spec.tensor;
  const size_t n = static_cast<size_t>(t.nelements());
  std::vector<char> bytes(t.nbytes());
  if (t.type == DType::I32) {
    std::vector<int32_t> v(n);
    if (spec.fill == Fill::Indices || spec.fill == Fill::Positions) {
      std::uniform_int_distribution<int64_t> d(0, std::max<int64_t>(spec.range, 1) - 1);
      for (auto& x : v) x = static_cast<int32_t>(d(rng));
    } else {
      std::uniform_int_distribution<int32_t> d(-1000, 1000);
      for (auto& x : v) x = d(rng);
    }
    std::memcpy(bytes.data(), v.data(), n * 4);
    return bytes;
  }
  std::vector<float> v(n);
  switch (spec.fill) {
    case Fill::NearOne: {
      std::uniform_real_distribution<float> d(0.9f, 1.1f);
      for (auto& x : v) x = d(rng);
      break;
    }
    case Fill::UniqueRow: {
      const int64_t ne0 = t.ne[0];
      for (int64_t r = 0; r < t.nrows(); ++r) {
        std::vector<float> row(static_cast<size_t>(ne0));
        for (int64_t i = 0; i < ne0; ++i) row[static_cast<size_t>(i)] = static_cast<float>(i) - ne0 / 2.0f;
        std::shuffle(row.begin(), row.end(), rng);
        std::copy(row.begin(), row.end(), v.begin() + r * ne0);
      }
      break;
    }
    case Fill::Zero:
      break;
    default: {
      std::uniform_real_distribution<float> d(-1.0f, 1.0f);
      for (auto& x : v) x = d(rng);
    }
  }
  for (int64_t r = 0; r < t.nrows(); ++r) {
    char* row = bytes.data() + static_cast<size_t>(r) * t.row_size();
    if (is_grid_iquant(t.type)) {
      // Never converted from floats (tessera/dtype.h): random blocks of about the values' size.
      float amax = 0.0f;
      for (int64_t i = 0; i < t.ne[0]; ++i)
        amax = std::max(amax, std::fabs(v[static_cast<size_t>(r * t.ne[0] + i)]));
      random_blocks(t.type, rng(), amax, row, t.ne[0]);
    } else {
      from_f32_row(t.type, v.data() + r * t.ne[0], row, t.ne[0]);
    }
  }
  return bytes;
}

// A tensor's values as f32 (through its buffer, so device layouts convert back).
std::vector<float> read_f32(const Tensor& node) {
  const Tensor& t = node.view_src != nullptr ? *node.view_src : node;
  std::vector<char> bytes(t.nbytes());
  tensor_get(t, bytes.data(), 0, bytes.size());
  std::vector<float> out(static_cast<size_t>(t.nelements()));
  TESSERA_ASSERT(t.is_contiguous());
  for (int64_t r = 0; r < t.nrows(); ++r)
    to_f32_row(t.type, bytes.data() + static_cast<size_t>(r) * t.row_size(), out.data() + r * t.ne[0],
               t.ne[0]);
  return out;
}

struct Compare {
  bool ok = true;
  double nmse = 0.0;
  std::string why;
};

Compare compare(const std::vector<float>& ref, const std::vector<float>& got, double max_nmse, bool exact) {
  Compare c;
  if (ref.size() != got.size()) return {false, 0.0, "size mismatch"};
  double err = 0.0, norm = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const float a = ref[i], b = got[i];
    if (std::isnan(b) && !std::isnan(a)) return {false, 0.0, fmt::format("NaN at {}", i)};
    if (std::isinf(b) || std::isinf(a)) {
      if (a != b) return {false, 0.0, fmt::format("inf mismatch at {} ({} vs {})", i, a, b)};
      continue;
    }
    if (std::isnan(a)) continue;
    if (exact && a != b) return {false, 0.0, fmt::format("value {} != {} at {}", b, a, i)};
    err += (static_cast<double>(a) - b) * (static_cast<double>(a) - b);
    norm += static_cast<double>(a) * a;
  }
  c.nmse = norm > 0.0 ? err / norm : err;
  c.ok = c.nmse <= max_nmse;
  return c;
}

uint32_t name_hash(const std::string& s) {
  uint32_t h = 2166136261u;
  for (char ch : s) h = (h ^ static_cast<uint8_t>(ch)) * 16777619u;
  return h;
}

}  // namespace

double Case::max_nmse(const Tensor& node) const {
  switch (node.op) {
    case Op::MulMat:
    case Op::MulMatId:
      return 5e-4;
    case Op::SoftMax:
    case Op::FlashAttnExt:  // another summation order and exp than the reference's doubles
      return 1e-6;
    case Op::Cpy:
    case Op::Dup:
    case Op::Cont: {
      const DType dst = node.view_src != nullptr ? node.view_src->type : node.type;
      const DType src = node.src[0] != nullptr ? node.src[0]->type : dst;
      // A quantizer's expected error (another backend may round some elements the other way).
      if (dst == DType::Q2_K || dst == DType::Q3_K) return 1e-1;
      if (dst == DType::Q4_0 || src == DType::Q4_0) return 2e-2;
      if (dst == DType::Q8_0 || src == DType::Q8_0) return 1e-4;
      if (is_quantized(dst)) return 2e-2;
      return 1e-6;
    }
    default:
      return 1e-7;
  }
}

Tensor* Case::leaf(Context& ctx, DType type, std::array<int64_t, 4> ne, Fill fill, int64_t range) {
  Tensor* t = ctx.new_tensor(type, std::span<const int64_t>(ne.data(), 4));
  t->name = fmt::format("leaf{}", leafs_.size());
  leafs_.push_back({t, fill, range});
  return t;
}

Outcome run_case(Case& c, const Target& target, uint32_t seed) {
  const std::string name = c.name();
  // The same graph twice: once for the target, once for the CPU reference kernels.
  Context ctx_t, ctx_r;
  c.leafs_.clear();
  Tensor* out_t = c.build(ctx_t);
  const auto leafs_t = c.leafs_;
  const auto pairs_t = c.pairs();
  std::vector<Case::LeafSpec> leafs_r;
  Tensor* out_r = nullptr;
  if (!c.self_check()) {
    c.leafs_.clear();
    out_r = c.build(ctx_r);
    leafs_r = c.leafs_;
  }
  Graph g_t{out_t}, g_r;
  if (out_r != nullptr) g_r.expand(out_r);
  for (auto& [a, b] : pairs_t) {
    g_t.expand(a);
    g_t.expand(b);
  }

  std::unique_ptr<Backend> backend;
  try {
    backend = target.make_backend();
  } catch (const Error& e) {
    return {Outcome::Fail, fmt::format("cannot create backend: {}", e.what())};
  }
  for (const Tensor* n : g_t.nodes())
    if (!is_view_op(n->op) && !backend->supports(*n)) return {Outcome::Skip, "not supported"};

  std::mt19937 rng(seed ^ name_hash(name));
  std::vector<std::vector<char>> data;
  for (const auto& spec : leafs_t) data.push_back(make_leaf_data(spec, rng));

  Placement pt;
  try {
    place(g_t, *target.buffer_type, pt);
    for (size_t i = 0; i < leafs_t.size(); ++i)  // leafs used only for their shape are not in the graph
      if (leafs_t[i].tensor->data != nullptr)
        tensor_set(*leafs_t[i].tensor, data[i].data(), 0, data[i].size());
    backend->compute(g_t);
    backend->synchronize();
  } catch (const Error& e) {
    return {Outcome::Fail, fmt::format("{} claims support but failed: {}", target.name, e.what())};
  }

  // Guards: nothing may write past a tensor.
  for (auto& [t, guard] : pt.guards) {
    std::vector<uint8_t> bytes(kGuardBytes);
    tensor_get(*guard, bytes.data(), 0, bytes.size());
    for (size_t i = 0; i < bytes.size(); ++i)
      if (bytes[i] != kGuardByte)
        return {Outcome::Fail, fmt::format("guard byte {} after {} was overwritten", i, t->describe())};
  }

  if (c.self_check()) {
    Tensor like;  // the threshold of the op under test
    like.op = c.op();
    for (auto& [a, b] : pairs_t) {
      const auto va = read_f32(*a), vb = read_f32(*b);
      const Compare cmp = compare(va, vb, c.max_nmse(like), false);
      if (!cmp.ok)
        return {Outcome::Fail, fmt::format("batch variance: {} vs {}: nmse={:.3g} {}", a->describe(),
                                           b->describe(), cmp.nmse, cmp.why)};
    }
    return {Outcome::Pass, ""};
  }

  Placement pr;
  cpu::CpuBackend reference(cpu::hardware_threads(), cpu::KernelSet::Reference);
  place(g_r, host_buffer_type(), pr);
  for (size_t i = 0; i < leafs_r.size(); ++i)
    if (leafs_r[i].tensor->data != nullptr) tensor_set(*leafs_r[i].tensor, data[i].data(), 0, data[i].size());
  reference.compute(g_r);

  double worst = 0.0;
  for (size_t i = 0; i < g_t.nodes().size() && i < g_r.nodes().size(); ++i) {
    const Tensor* nt = g_t.nodes()[i];
    const Tensor* nr = g_r.nodes()[i];
    if (is_view_op(nt->op)) continue;
    const bool exact = nt->type == DType::I32;
    const Compare cmp = compare(read_f32(*nr), read_f32(*nt), c.max_nmse(*nt), exact);
    worst = std::max(worst, cmp.nmse);
    if (!cmp.ok)
      return {Outcome::Fail,
              fmt::format("node {} {}: nmse={:.3g} {}", i, op_name(nt->op), cmp.nmse, cmp.why)};
  }
  return {Outcome::Pass, fmt::format("nmse={:.3g}", worst)};
}

Totals run_tests(const Target& target, std::vector<std::unique_ptr<Case>>& cases, const Options& options,
                 const std::function<void(const std::string&)>& print) {
  Totals totals;
  for (auto& c : cases) {
    if (!options.op.empty() && op_name(c->op()) != options.op) continue;
    const std::string name = c->name();
    if (!options.type.empty() && name.find("type=" + options.type) == std::string::npos &&
        name.find("type_a=" + options.type) == std::string::npos &&
        name.find("type_src=" + options.type) == std::string::npos &&
        name.find("type_dst=" + options.type) == std::string::npos)
      continue;
    const Outcome o = run_case(*c, target, options.seed);
    switch (o.kind) {
      case Outcome::Pass:
        ++totals.passed;
        print(fmt::format("  {}: OK", name));
        break;
      case Outcome::Fail:
        ++totals.failed;
        print(fmt::format("  {}: FAIL ({})", name, o.detail));
        break;
      case Outcome::Skip:
        ++totals.skipped;
        print(fmt::format("  {}: not supported", name));
        break;
    }
  }
  return totals;
}

void run_perf(const Target& target, std::vector<std::unique_ptr<Case>>& cases, const Options& options,
              const std::function<void(const std::string&)>& print) {
  for (auto& c : cases) {
    if (c->self_check()) continue;
    if (!options.op.empty() && op_name(c->op()) != options.op) continue;
    const std::string name = c->name();
    if (!options.type.empty() && name.find("type=" + options.type) == std::string::npos &&
        name.find("type_a=" + options.type) == std::string::npos)
      continue;
    Context ctx;
    c->leafs_.clear();
    Tensor* out = c->build(ctx);
    Graph g{out};
    auto backend = target.make_backend();
    bool supported = true;
    for (const Tensor* n : g.nodes()) supported = supported && (is_view_op(n->op) || backend->supports(*n));
    if (!supported) {
      print(fmt::format("  {}: not supported", name));
      continue;
    }
    Placement p;
    place(g, *target.buffer_type, p);
    std::mt19937 rng(options.seed);
    for (const auto& spec : c->leafs_) {
      const auto bytes = make_leaf_data(spec, rng);
      if (spec.tensor->data != nullptr) tensor_set(*spec.tensor, bytes.data(), 0, bytes.size());
    }
    try {
      backend->compute(g);  // warm-up (compiles kernels on first use)
      backend->synchronize();
      int runs = 0;
      const auto t0 = std::chrono::steady_clock::now();
      double elapsed = 0.0;
      while (elapsed < options.perf_seconds) {
        backend->compute(g);
        backend->synchronize();
        ++runs;
        elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
      const double per_run = elapsed / runs;
      const double flops = c->flops(*out);
      size_t bytes = 0;
      for (const Tensor* t : owners(g)) bytes += t->nbytes();
      if (flops > 0)
        print(fmt::format("  {}: {} runs, {:.3f} ms/run, {:.2f} GFLOP/s", name, runs, per_run * 1e3,
                          flops / per_run / 1e9));
      else
        print(fmt::format("  {}: {} runs, {:.3f} ms/run, {:.2f} GB/s", name, runs, per_run * 1e3,
                          static_cast<double>(bytes) / per_run / 1e9));
    } catch (const Error& e) {
      print(fmt::format("  {}: FAIL ({})", name, e.what()));
    }
  }
}

Totals run_tests(const Target& target, const Options& options, const Print& print) {
  auto cases = all_cases();
  return run_tests(target, cases, options, print);
}

void run_perf(const Target& target, const Options& options, const Print& print) {
  auto cases = all_cases();
  run_perf(target, cases, options, print);
}

std::vector<Target> registered_targets() {
  std::vector<Target> targets;
  for (Device* dev : Registry::instance().devices()) {
    targets.push_back({dev->name(), [dev] { return dev->make_backend(); }, &dev->buffer_type()});
  }
  return targets;
}

}  // namespace tessera::conformance
