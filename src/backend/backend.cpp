#include "tessera/backend.h"

#include "tessera/buffer.h"

namespace tessera {
namespace {

// An event on a synchronous backend: work is done when it is recorded.
class HostEvent final : public Event {
 public:
  void record(Backend& backend) override { backend.synchronize(); }
  void synchronize() override {}
};

}  // namespace

void Backend::set_async(Tensor& t, const void* src, size_t offset, size_t size) {
  tensor_set(t, src, offset, size);
}

void Backend::get_async(const Tensor& t, void* dst, size_t offset, size_t size) {
  tensor_get(t, dst, offset, size);
}

std::unique_ptr<Event> Backend::create_event() { return std::make_unique<HostEvent>(); }

void Backend::wait(Event& event) { event.synchronize(); }

}  // namespace tessera
