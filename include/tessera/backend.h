#pragma once
// Backend (an execution queue on a device) and Event (orders work across queues).
#include <cstddef>
#include <memory>
#include <string>

#include "tessera/graph.h"
#include "tessera/tensor.h"

namespace tessera {

class Device;
class Backend;

class Event {
 public:
  virtual ~Event() = default;
  // Marks the point in `backend`'s queue that waiters wait for.
  virtual void record(Backend& backend) = 0;
  // Blocks the caller until the recorded work has finished; rethrows its error, if any.
  virtual void synchronize() = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual Device& device() const = 0;

  // Computes every node of the graph (tensors must already have memory this backend can reach).
  virtual void compute(Graph& graph) = 0;
  // True when this backend can compute node `op` with its source types and layouts.
  virtual bool supports(const Tensor& op) const = 0;
  // True when running `op` here pays off even if its inputs must be copied in.
  virtual bool wants_offload(const Tensor& /*op*/) const { return false; }

  // Asynchronous transfers (the default is synchronous); complete by synchronize().
  virtual void set_async(Tensor& t, const void* src, size_t offset, size_t size);
  virtual void get_async(const Tensor& t, void* dst, size_t offset, size_t size);
  // Copies src (any backend's memory) into dst (this backend's memory); false when it cannot.
  virtual bool copy_async(const Tensor& /*src*/, Tensor& /*dst*/) { return false; }
  virtual void synchronize() {}

  virtual std::unique_ptr<Event> create_event();
  // Makes this backend's later work wait for `event` without blocking the caller.
  virtual void wait(Event& event);
};

}  // namespace tessera
