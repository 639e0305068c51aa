// The device list.
#include <fmt/format.h>

#include <algorithm>

#include "capi/handles.h"
#include "tessera/device.h"

namespace {

void copy_cut(const std::string& text, char* out, size_t size) {
  const size_t n = std::min(text.size(), size - 1);
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

}  // namespace

extern "C" {

tessera_status tessera_device_count(size_t* count) {
  return tessera::capi::guarded([&] {
    tessera::capi::require(count, "count");
    *count = tessera::Registry::instance().devices().size();
  });
}

tessera_status tessera_device_get(size_t index, tessera_device_info* info) {
  using namespace tessera;
  return capi::guarded([&] {
    capi::require(info, "info");
    const auto& devices = Registry::instance().devices();
    if (index >= devices.size())
      capi::fail(TESSERA_INVALID_ARGUMENT, fmt::format("device {} of {}", index, devices.size()));
    const Device& d = *devices[index];
    tessera_device_info out{};
    copy_cut(d.name(), out.name, sizeof out.name);
    copy_cut(d.description(), out.description, sizeof out.description);
    out.kind = d.kind() == DeviceKind::Cpu   ? TESSERA_DEVICE_CPU
               : d.kind() == DeviceKind::Gpu ? TESSERA_DEVICE_GPU
                                             : TESSERA_DEVICE_ACCELERATOR;
    const DeviceMemory mem = d.memory();
    out.memory_total = mem.total;
    out.memory_free = mem.free > 0 ? mem.free : mem.total;
    *info = out;
  });
}

}  // extern "C"
