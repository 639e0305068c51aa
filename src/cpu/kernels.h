#pragma once
// The CPU kernel interface: one run_* entry per op family (src/cpu/ops/<family>.cpp).
// Kernels read sources through their strides (any layout ggml allows) and write dst, which is
// contiguous unless the op says otherwise (CPY writes into a view of its destination).
#include <cstdint>
#include <vector>

#include "core/function_ref.h"
#include "tessera/cpu.h"
#include "tessera/tensor.h"

namespace tessera {
class HostScratchArena;
}

namespace tessera::cpu {

class ThreadPool;

struct ComputeContext {
  ThreadPool* pool = nullptr;  // nullptr = run on the caller only
  int n_threads = 1;           // 1: this node runs on the caller only; more: on the whole pool
  KernelSet kernels = KernelSet::Reference;
  std::vector<char>* scratch = nullptr;  // per-backend work memory, reused across nodes
  HostScratchArena* arena = nullptr;     // preferred when set: host virtual memory sized to the need
  // Nodes touching fewer bytes (bytes_touched) run on the caller alone: what a kernel running
  // other ops' kernels inside it (FLASH_ATTN_EXT's composed strategy) decides for each of them.
  size_t min_parallel_bytes = 0;

  // Splits [0, n) into contiguous chunks (a few per thread, sizes differing by at most one) and runs
  // fn(begin, end) for each on the pool's threads, which claim them as they come free (so they finish
  // together). Each item is computed by exactly one call, so results never depend on the thread count
  // or on which thread ran which chunk.
  void parallel_for(int64_t n, FunctionRef<void(int64_t, int64_t)> fn) const;
  // Scratch memory of at least `bytes` (contents undefined), valid until the next call.
  char* scratch_memory(size_t bytes) const;
  bool reference() const noexcept { return kernels == KernelSet::Reference; }
};

// What a node reads and writes, roughly: its elements' bytes and its sources' (GET_ROWS: only the
// rows it gathers), not the span of a strided view.
size_t bytes_touched(const Tensor& node);

// Dispatches one node to its family's kernel; throws Error(Unsupported) for an unknown op/type.
void compute_node(const ComputeContext& ctx, Tensor& node);
// True when compute_node can run this node (op and type combination).
bool supports_node(const Tensor& node);

// ---- op families ----
void run_copy(const ComputeContext& ctx, Tensor& dst);      // DUP, CONT, CPY      (copy.cpp)
void run_get_rows(const ComputeContext& ctx, Tensor& dst);  // GET_ROWS           (get_rows.cpp)
void run_repeat(const ComputeContext& ctx, Tensor& dst);    // REPEAT             (repeat.cpp)
void run_concat(const ComputeContext& ctx, Tensor& dst);    // CONCAT             (concat.cpp)
void run_binary(const ComputeContext& ctx, Tensor& dst);    // ADD, MUL, DIV      (binary.cpp)
void run_acc(const ComputeContext& ctx, Tensor& dst);       // ACC                (acc.cpp)
void run_add_id(const ComputeContext& ctx, Tensor& dst);    // ADD_ID             (add_id.cpp)
void run_glu(const ComputeContext& ctx, Tensor& dst);       // GLU                (glu.cpp)
void run_unary(const ComputeContext& ctx, Tensor& dst);    // UNARY, LEAKY_RELU, SCALE, SQR, CLAMP (unary.cpp)
void run_norm(const ComputeContext& ctx, Tensor& dst);     // NORM, RMS_NORM, GROUP_NORM (norm.cpp)
void run_upscale(const ComputeContext& ctx, Tensor& dst);  // UPSCALE            (upscale.cpp)
void run_pad(const ComputeContext& ctx, Tensor& dst);      // PAD                (pad.cpp)
void run_generator(const ComputeContext& ctx, Tensor& dst);   // ARANGE, TIMESTEP_EMBEDDING (generators.cpp)
void run_mul_mat(const ComputeContext& ctx, Tensor& dst);     // MUL_MAT            (mul_mat.cpp)
void run_mul_mat_id(const ComputeContext& ctx, Tensor& dst);  // MUL_MAT_ID        (mul_mat.cpp)
void run_diag_mask_inf(const ComputeContext& ctx, Tensor& dst);  // DIAG_MASK_INF  (softmax.cpp)
void run_soft_max(const ComputeContext& ctx, Tensor& dst);       // SOFT_MAX           (softmax.cpp)
void run_rope(const ComputeContext& ctx, Tensor& dst);           // ROPE               (rope.cpp)
void run_flash_attn(const ComputeContext& ctx, Tensor& dst);     // FLASH_ATTN_EXT     (flash_attn.cpp)
void run_im2col(const ComputeContext& ctx, Tensor& dst);         // IM2COL             (im2col.cpp)
void run_pool_2d(const ComputeContext& ctx, Tensor& dst);        // POOL_2D            (pool.cpp)
void run_sum_rows(const ComputeContext& ctx, Tensor& dst);       // SUM_ROWS           (sum_rows.cpp)
void run_argsort(const ComputeContext& ctx, Tensor& dst);        // ARGSORT            (argsort.cpp)

}  // namespace tessera::cpu
