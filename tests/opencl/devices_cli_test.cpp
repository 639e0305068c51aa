// `tessera devices` lists the CPU and every OpenCL device with its memory.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>

#include "opencl/opencl_test_util.h"

TEST(DevicesCli, ListsTheCpuAndEveryOpenClDeviceWithItsMemory) {
  ASSERT_TRUE(tessera::test::kPoclDevices);
  std::string out;
  FILE* p = popen((std::string(TESSERA_CLI) + " devices").c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::array<char, 512> line;
  while (fgets(line.data(), line.size(), p) != nullptr) out += line.data();
  ASSERT_EQ(pclose(p), 0) << out;
  for (const char* name : {"CPU ", "OpenCL0 ", "OpenCL1 "}) {
    const auto at = out.find(name);
    ASSERT_NE(at, std::string::npos) << out;
    const std::string row = out.substr(at, out.find('\n', at) - at);
    EXPECT_NE(row.find(" MiB"), std::string::npos) << row;
  }
  EXPECT_NE(out.find("pthread"), std::string::npos) << out;
}
