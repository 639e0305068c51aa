#pragma once
// An arena that owns tensor descriptors (and, optionally, their host memory).
#include <deque>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "tessera/tensor.h"

namespace tessera {

class Context {
 public:
  // With allocate_data, every non-view tensor created here gets zeroed host memory owned by
  // the context (handy for tests and small CPU work). Without it, tensors are descriptors only
  // and a Buffer or the graph allocator gives them memory.
  explicit Context(bool allocate_data = false) : allocate_data_(allocate_data) {}
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // 1 to 4 dims; ne[d] >= 0; quantized types need ne[0] % block_size == 0.
  Tensor* new_tensor(DType type, std::span<const int64_t> ne);
  Tensor* new_tensor(DType type, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1);
  // A descriptor viewing `source`'s memory with the given shape, strides and byte offset.
  Tensor* new_view(Tensor* source, DType type, const std::array<int64_t, kMaxDims>& ne,
                   const std::array<size_t, kMaxDims>& nb, size_t offset);

  bool allocates_data() const noexcept { return allocate_data_; }
  Tensor* find(std::string_view name) noexcept;
  const std::deque<Tensor>& tensors() const noexcept { return tensors_; }
  std::deque<Tensor>& tensors() noexcept { return tensors_; }

 private:
  struct FreeDeleter {
    void operator()(void* p) const noexcept;
  };
  bool allocate_data_;
  std::deque<Tensor> tensors_;
  std::vector<std::unique_ptr<void, FreeDeleter>> memory_;
};

// Resolves a view chain's address once its root has memory (data = root data + offset).
void resolve_view_data(Tensor& view);

}  // namespace tessera
