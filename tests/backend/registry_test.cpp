// The Registry: the CPU device (a static of its own) first, then each runtime's devices.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tessera/cpu.h"
#include "tessera/device.h"
#include "tessera/error.h"

using namespace tessera;

TEST(Registry, ListsTheCpuDeviceFirst) {
  const auto& devices = Registry::instance().devices();
  ASSERT_FALSE(devices.empty());
  EXPECT_EQ(devices.front(), &cpu::cpu_device());
  EXPECT_EQ(devices.front()->name(), "CPU");
  EXPECT_EQ(devices.front()->kind(), DeviceKind::Cpu);
  EXPECT_EQ(&Registry::instance().get("CPU"), &cpu::cpu_device());
  cpu::CpuBackend backend(1);
  EXPECT_EQ(&backend.device(), &cpu::cpu_device());
}

TEST(Registry, UnknownNameIsAnErrorListingTheDevices) {
  EXPECT_EQ(Registry::instance().find("NoSuchDevice"), nullptr);
  try {
    (void)Registry::instance().get("NoSuchDevice");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    const std::string m = e.what();
    EXPECT_NE(m.find("'NoSuchDevice'"), std::string::npos) << m;
    EXPECT_NE(m.find("devices: CPU"), std::string::npos) << m;
  }
}

TEST(Registry, RefusesASecondDeviceOfTheSameName) {
  struct Named final : Device {
    std::string name() const override { return "CPU"; }
    std::string description() const override { return "a second CPU"; }
    DeviceKind kind() const override { return DeviceKind::Cpu; }
    DeviceMemory memory() const override { return {}; }
    BufferType& buffer_type() override { return cpu::cpu_device().buffer_type(); }
    std::unique_ptr<Backend> make_backend() override { return nullptr; }
  };
  const size_t before = Registry::instance().devices().size();
  EXPECT_THROW(Registry::instance().add(std::make_unique<Named>()), Error);
  EXPECT_EQ(Registry::instance().devices().size(), before);
}
