#include "device/oplib.h"

#include "core/check.h"
#include "tessera/error.h"

namespace tessera::device {

void launch_labeled_host_func(Runtime& runtime, Stream& stream, std::string where, std::function<void()> fn) {
  runtime.launch_host_func(stream, [fn = std::move(fn), where = std::move(where)] {
    try {
      fn();
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("{}: {}", where, e.what()));
    } catch (const std::exception& e) {
      throw Error(ErrorCode::DeviceError, fmt::format("{}: {}", where, e.what()));
    }
  });
}

std::string OpContext::label() const {
  const std::string device_name = runtime->properties(device).name;
  if (node == nullptr) return device_name;
  return fmt::format("{}: {} (node {})", device_name, op_name(node->op), node->describe());
}

void OpContext::check_async(const void* src, size_t size, std::function<void(const void*)> check) const {
  TESSERA_ASSERT(size > 0 && size <= 64 && staging != nullptr);
  ScratchPool* pool = staging;
  void* host = pool->allocate(size);
  try {
    runtime->copy_d2h_async(*stream, host, src, size);
  } catch (...) {
    pool->release(host, size);
    throw;
  }
  launch_labeled_host_func(*runtime, *stream, label(), [host, size, pool, check = std::move(check)] {
    struct Release {
      ScratchPool* pool;
      void* ptr;
      size_t size;
      ~Release() { pool->release(ptr, size); }
    } release{pool, host, size};
    check(host);
  });
}

}  // namespace tessera::device
