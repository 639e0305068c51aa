#include "tessera/context.h"

#include <cstdlib>
#include <cstring>
#include <limits>

#include "core/check.h"

namespace tessera {

void Context::FreeDeleter::operator()(void* p) const noexcept { std::free(p); }

Tensor* Context::new_tensor(DType type, std::span<const int64_t> ne) {
  if (ne.empty() || ne.size() > static_cast<size_t>(kMaxDims))
    raise(ErrorCode::InvalidArgument, "new_tensor: {} dims given, 1 to 4 allowed", ne.size());
  std::array<int64_t, kMaxDims> shape{1, 1, 1, 1};
  int64_t count = 1;
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] < 0) raise(ErrorCode::InvalidArgument, "new_tensor: ne[{}] = {} is negative", d, ne[d]);
    shape[d] = ne[d];
    if (ne[d] != 0 && count > std::numeric_limits<int64_t>::max() / ne[d])
      raise(ErrorCode::InvalidArgument,
            "new_tensor: {} tensor of shape [{}]: the element count overflows int64", name(type),
            fmt::join(ne, ", "));
    count *= ne[d];
  }
  const int64_t bs = traits(type).block_size;
  if (shape[0] % bs != 0)
    raise(ErrorCode::InvalidArgument, "new_tensor: {} needs ne[0] divisible by {}, got {}", name(type), bs,
          shape[0]);
  Tensor& t = tensors_.emplace_back();
  t.type = type;
  t.ne = shape;
  t.nb = contiguous_strides(type, shape);
  if (allocate_data_) {
    const size_t bytes = std::max<size_t>(t.nbytes(), 1);
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (p == nullptr)
      raise(ErrorCode::OutOfMemory, "new_tensor: cannot allocate {} bytes of host memory", bytes);
    std::memset(p, 0, bytes);
    memory_.emplace_back(p);
    t.data = p;
  }
  return &t;
}

Tensor* Context::new_tensor(DType type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
  const int64_t ne[4] = {ne0, ne1, ne2, ne3};
  return new_tensor(type, std::span<const int64_t>(ne, 4));
}

Tensor* Context::new_view(Tensor* source, DType type, const std::array<int64_t, kMaxDims>& ne,
                          const std::array<size_t, kMaxDims>& nb, size_t offset) {
  TESSERA_ASSERT(source != nullptr);
  // Views of views point at the memory's owner.
  Tensor* root = source->view_src != nullptr ? source->view_src : source;
  const size_t base = source->view_src != nullptr ? source->view_offset : 0;
  Tensor& t = tensors_.emplace_back();
  t.type = type;
  t.ne = ne;
  t.nb = nb;
  t.view_src = root;
  t.view_offset = base + offset;
  resolve_view_data(t);
  return &t;
}

Tensor* Context::find(std::string_view name) noexcept {
  for (auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

void resolve_view_data(Tensor& view) {
  if (view.view_src == nullptr) return;
  view.buffer = view.view_src->buffer;
  view.data =
      view.view_src->data != nullptr ? static_cast<char*>(view.view_src->data) + view.view_offset : nullptr;
}

}  // namespace tessera
