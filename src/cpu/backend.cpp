#include <algorithm>
#include <thread>

#include "backend/host_vmm.h"
#include "core/check.h"
#include "cpu/interleave.h"
#include "cpu/kernels.h"
#include "cpu/thread_pool.h"
#include "tessera/buffer.h"
#include "tessera/cpu.h"
#include "tessera/log.h"
#include "tessera/op_types.h"

namespace tessera::cpu {

void ComputeContext::parallel_for(int64_t n, FunctionRef<void(int64_t, int64_t)> fn) const {
  if (n <= 0) return;
  if (n == 1 || n_threads <= 1 || pool == nullptr) {
    fn(0, n);
    return;
  }
  pool->parallel_for(n, fn);
}

char* ComputeContext::scratch_memory(size_t bytes) const {
  if (arena != nullptr) return arena->memory(bytes);
  TESSERA_ASSERT(scratch != nullptr);
  if (scratch->size() < bytes) scratch->resize(bytes);
  return scratch->data();
}

void compute_node(const ComputeContext& ctx, Tensor& node) {
  switch (node.op) {
    case Op::None:
    case Op::Reshape:
    case Op::View:
    case Op::Permute:
    case Op::Transpose:
      return;
    case Op::Dup:
    case Op::Cont:
    case Op::Cpy:
      return run_copy(ctx, node);
    case Op::GetRows:
      return run_get_rows(ctx, node);
    case Op::Repeat:
      return run_repeat(ctx, node);
    case Op::Concat:
      return run_concat(ctx, node);
    case Op::Add:
    case Op::Mul:
    case Op::Div:
      return run_binary(ctx, node);
    case Op::Acc:
      return run_acc(ctx, node);
    case Op::AddId:
      return run_add_id(ctx, node);
    case Op::Glu:
      return run_glu(ctx, node);
    case Op::Unary:
    case Op::LeakyRelu:
    case Op::Scale:
    case Op::Sqr:
    case Op::Clamp:
      return run_unary(ctx, node);
    case Op::Norm:
    case Op::RmsNorm:
    case Op::GroupNorm:
      return run_norm(ctx, node);
    case Op::Upscale:
      return run_upscale(ctx, node);
    case Op::Pad:
      return run_pad(ctx, node);
    case Op::Arange:
    case Op::TimestepEmbedding:
      return run_generator(ctx, node);
    case Op::MulMat:
      return run_mul_mat(ctx, node);
    case Op::MulMatId:
      return run_mul_mat_id(ctx, node);
    case Op::DiagMaskInf:
      return run_diag_mask_inf(ctx, node);
    case Op::SoftMax:
      return run_soft_max(ctx, node);
    case Op::FlashAttnExt:
      return run_flash_attn(ctx, node);
    case Op::Rope:
      return run_rope(ctx, node);
    case Op::Im2Col:
      return run_im2col(ctx, node);
    case Op::Pool2D:
      return run_pool_2d(ctx, node);
    case Op::SumRows:
      return run_sum_rows(ctx, node);
    case Op::Argsort:
      return run_argsort(ctx, node);
    case Op::Count_:
      break;
  }
  raise(ErrorCode::Unsupported, "CPU: no kernel for op {} (node {})", op_name(node.op), node.describe());
}

bool supports_node(const Tensor& node) {
  // The CPU implements every type combination core's op x type table defines, and only those.
  return op_types_defined(node);
}

int hardware_threads() noexcept {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

struct CpuBackend::Workers {
  explicit Workers(int n_threads) : pool(std::make_unique<ThreadPool>(n_threads)) {}
  std::unique_ptr<ThreadPool> pool;
  HostScratchArena scratch;  // kernels' work memory: grows to what the graphs ask for
};

int bounded_threads(int requested, ThreadLimit limit) {
  if (requested < 0)
    raise(ErrorCode::InvalidArgument, "CPU: thread count must be >= 0 (0 = all cores), got {}", requested);
  const int cores = hardware_threads();
  if (requested == 0) return cores;
  return limit == ThreadLimit::Exact ? requested : std::min(requested, cores);
}

namespace {

// More threads than the machine has only take turns on its cores (and spin while they wait).
int bounded_threads_warned(int requested, ThreadLimit limit) {
  const int n = bounded_threads(requested, limit);
  if (requested != 0 && n != requested)
    log(LogLevel::Warn,
        fmt::format("CPU: {} threads requested but the machine has {} hardware threads; using {}", requested,
                    hardware_threads(), n));
  return n;
}

}  // namespace

CpuBackend::CpuBackend(int n_threads, KernelSet kernels, ThreadLimit limit)
    : n_threads_(bounded_threads_warned(n_threads, limit)),
      kernels_(kernels),
      limit_(limit),
      workers_(std::make_unique<Workers>(n_threads_)) {}

CpuBackend::~CpuBackend() = default;

std::string CpuBackend::name() const { return kernels_ == KernelSet::Reference ? "CPU-reference" : "CPU"; }

Device& CpuBackend::device() const { return cpu_device(); }

void CpuBackend::set_threads(int n_threads) {
  if (n_threads < 1) raise(ErrorCode::InvalidArgument, "CPU: thread count must be >= 1, got {}", n_threads);
  const int bounded = bounded_threads_warned(n_threads, limit_);
  if (bounded == n_threads_) return;
  auto pool = std::make_unique<ThreadPool>(bounded);  // on failure the old pool stays in service
  workers_->pool = std::move(pool);
  n_threads_ = bounded;
}

bool CpuBackend::supports(const Tensor& op) const { return supports_node(op); }

namespace {

// The bytes of a tensor's elements, not the span its strides cover (a generation step's store
// into the transposed V cache is a few hundred bytes spread over megabytes).
size_t element_bytes(const Tensor& t) {
  return t.row_size() * static_cast<size_t>(std::max<int64_t>(t.ne[1] * t.ne[2] * t.ne[3], 0));
}

}  // namespace

// On stories260K most nodes touch a few hundred bytes. GET_ROWS reads only the rows it gathers
// (one token's embedding, not the whole table).
size_t bytes_touched(const Tensor& node) {
  size_t bytes = element_bytes(node);
  for (int k = 0; k < kMaxSources; ++k) {
    const Tensor* s = node.src[k];
    if (s == nullptr) continue;
    bytes += node.op == Op::GetRows && k == 0 ? element_bytes(node) : element_bytes(*s);
  }
  return bytes;
}

namespace {

// How far ahead the idle workers read the weights of the next MUL_MAT nodes: a few of a layer's
// matrices (m250: attention output, gate and up are 3.8 MB), far under the last-level cache.
constexpr size_t kReadAheadBytes = size_t{4} << 20;

// The weights each MUL_MAT node reads and the K/V each FLASH_ATTN_EXT node reads (a leaf's
// memory: model weights, the KV cache), in graph order.
struct WeightRead {
  size_t node;
  ThreadPool::Range range;
};

std::vector<WeightRead> weight_reads(const std::vector<Tensor*>& nodes) {
  std::vector<WeightRead> out;
  auto add = [&](size_t i, const Tensor* w) {
    if (w == nullptr || w->data == nullptr) return;
    const Tensor& root = w->view_src != nullptr ? *w->view_src : *w;
    if (root.op == Op::None) out.push_back({i, {w->data, w->nbytes()}});
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    // (Not MUL_MAT_ID's: a token reads a few of the experts, and which is known only when it runs.)
    if (nodes[i]->op == Op::MulMat) add(i, nodes[i]->src[0]);
    if (nodes[i]->op == Op::FlashAttnExt) {
      add(i, nodes[i]->src[1]);
      add(i, nodes[i]->src[2]);
    }
  }
  return out;
}

// Hands the workers the weights of the MUL_MAT nodes after `after`, up to kReadAheadBytes.
void read_ahead(ThreadPool& pool, const std::vector<WeightRead>& reads, size_t after) {
  ThreadPool::Range ranges[ThreadPool::kMaxReadAhead];
  int count = 0;
  size_t bytes = 0;
  for (size_t r = after; r < reads.size() && count < ThreadPool::kMaxReadAhead && bytes < kReadAheadBytes;
       ++r) {
    ranges[count] = reads[r].range;
    ranges[count].size = std::min(ranges[count].size, kReadAheadBytes - bytes);
    bytes += ranges[count++].size;
  }
  pool.read_ahead_while_idle(ranges, count);
}

}  // namespace

void CpuBackend::compute(Graph& graph) {
  ComputeContext ctx;
  ctx.pool = workers_->pool.get();
  ctx.kernels = kernels_;
  ctx.arena = &workers_->scratch;
  ctx.min_parallel_bytes = min_parallel_bytes_;
  // The workers spin from node to node rather than park and wake for each.
  ThreadPool::GraphScope scope(*ctx.pool);
  // While a node runs on the caller alone, the idle workers read ahead the next MUL_MAT weights
  // (and attention's K/V).
  const std::vector<WeightRead> reads =
      n_threads_ > 1 && kernels_ == KernelSet::Fast ? weight_reads(graph.nodes()) : std::vector<WeightRead>{};
  size_t next_read = 0;
  if (!reads.empty()) read_ahead(*ctx.pool, reads, 0);
  struct StopReadAhead {  // however compute ends
    ThreadPool& pool;
    bool on;
    ~StopReadAhead() {
      if (on) pool.read_ahead_while_idle(nullptr, 0);
    }
  } stop{*ctx.pool, !reads.empty()};
  const std::vector<Tensor*>& nodes = graph.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    Tensor* node = nodes[i];
    if (next_read < reads.size() && reads[next_read].node == i) {
      while (next_read < reads.size() && reads[next_read].node == i) ++next_read;
      read_ahead(*ctx.pool, reads, next_read);
    }
    if (is_view_op(node->op) || node->op == Op::None || node->nelements() == 0) continue;
    if (node->data == nullptr)
      raise(ErrorCode::InvalidArgument, "CPU: node {} {} has no memory (allocate the graph first)",
            op_name(node->op), node->describe());
    if (node->buffer != nullptr && !node->buffer->type().is_host())
      raise(ErrorCode::InvalidArgument, "CPU: node {} lives in {} memory, not host memory", node->describe(),
            node->buffer->type().name());
    for (int k = 0; k < kMaxSources; ++k)  // only MUL_MAT(_ID) reads weights in the interleaved layout
      if (node->src[k] != nullptr && in_interleaved_layout(*node->src[k]) &&
          ((node->op != Op::MulMat && node->op != Op::MulMatId) || k != 0))
        raise(ErrorCode::Unsupported, "CPU: {} {} cannot read {}, whose rows are interleaved for MUL_MAT",
              op_name(node->op), node->describe(), node->src[k]->describe());
    ctx.n_threads = bytes_touched(*node) < min_parallel_bytes_ ? 1 : n_threads_;
    compute_node(ctx, *node);
  }
}

}  // namespace tessera::cpu
