#pragma once
// The first error a stream's host functions raised, kept until stream_synchronize takes it (events
// recorded after it see it too). Shared by the runtimes whose host functions run on threads of
// their own (OpenCL's callbacks, CUDA's cuLaunchHostFunc).
#include <exception>
#include <mutex>
#include <utility>

namespace tessera::device {

class ErrorSlot {
 public:
  void set(std::exception_ptr e) {
    std::lock_guard lock(mutex_);
    if (!error_) error_ = std::move(e);
  }
  std::exception_ptr peek() {
    std::lock_guard lock(mutex_);
    return error_;
  }
  std::exception_ptr take() {
    std::lock_guard lock(mutex_);
    return std::exchange(error_, nullptr);
  }

 private:
  std::mutex mutex_;
  std::exception_ptr error_;
};

}  // namespace tessera::device
