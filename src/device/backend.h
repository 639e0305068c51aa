#pragma once
// DeviceBackend: one in-order stream on one device of a Runtime. Transfers stay asynchronous
// (re-laid quantized data is staged in pinned memory), events order work across streams and
// devices, and each graph (a scheduler split) runs as an Executable its op library prepared for
// that shape: prepared once per shape signature, launched, captured when the shape repeats, then
// replayed (executable.h).
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/graph_index.h"
#include "device/buffer.h"
#include "device/executable.h"
#include "device/oplib.h"
#include "device/pool.h"
#include "device/runtime.h"
#include "tessera/backend.h"

namespace tessera::device {

class DeviceBackend final : public Backend {
 public:
  DeviceBackend(Device& device, Runtime& runtime, int index, const OpLibrary& ops);
  ~DeviceBackend() override;

  std::string name() const override;
  Device& device() const override { return *device_; }
  void compute(Graph& graph) override;
  bool supports(const Tensor& op) const override;
  // op_batch_size(op) >= TESSERA_OFFLOAD_MIN_BATCH (default 32); never for a batch of 0
  // (GET_ROWS, views).
  bool wants_offload(const Tensor& op) const override;

  void set_async(Tensor& t, const void* src, size_t offset, size_t size) override;
  void get_async(const Tensor& t, void* dst, size_t offset, size_t size) override;
  bool copy_async(const Tensor& src, Tensor& dst) override;
  // Waits for all queued work; throws the first error async work raised, naming its op.
  void synchronize() override;

  std::unique_ptr<Event> create_event() override;
  void wait(Event& event) override;

  Runtime& runtime() const noexcept { return *runtime_; }
  int device_index() const noexcept { return index_; }
  Stream& stream() const noexcept { return *stream_; }
  ScratchPool& pool() const noexcept { return *pool_; }
  // Pinned host memory for staging (released by the stream once the work that uses it is done).
  ScratchPool& staging() const noexcept { return *staging_; }

  // Runs fn on the host in stream order; an Error it throws is reported as raised by `node`.
  void host_func(const Tensor* node, std::function<void()> fn);

  // What compute did with executables since construction; fused_nodes is the last run one's.
  struct ExecutableStats {
    uint64_t prepared = 0, launched = 0, captured = 0, replayed = 0;
    size_t fused_nodes = 0;
  };
  const ExecutableStats& executable_stats() const noexcept { return stats_; }

 private:
  struct Checkpoint {
    std::unique_ptr<StreamEvent> event;
    std::string label;
  };
  std::string label(const Tensor& node) const;
  void check_on_device(const Tensor& t, const char* what) const;
  void checkpoint(const Tensor& node);
  void release_after_stream(void* ptr, size_t size);
  void drain() noexcept;  // waits for the stream while another error is on its way
  struct Prepared {
    Signature key;
    std::unique_ptr<Executable> exe;
    uint64_t runs = 0;
    bool captured = false;
  };
  Prepared& prepared_for(const Graph& graph, const SplitView& split);

  Device* device_;
  Runtime* runtime_;
  int index_;
  const OpLibrary* ops_;
  std::unique_ptr<Stream> stream_;
  std::unique_ptr<ScratchPool> pool_;
  std::unique_ptr<BestFitPool> staging_;
  std::vector<Checkpoint> checkpoints_;  // one per node since the last synchronize
  std::vector<std::unique_ptr<StreamEvent>> spare_events_;
  int64_t min_batch_;
  bool checkpoints_enabled_ = false;  // TESSERA_DEVICE_CHECKPOINTS: an event per node names failures
  std::function<void(const Tensor&)> checkpoint_hook_;
  std::vector<std::unique_ptr<Prepared>> prepared_;  // most recently used first
  GraphIndex split_index_;                           // per compute: the split's positions
  Signature key_;                                    // per compute: its shape signature
  ExecutableStats stats_;
};

}  // namespace tessera::device
