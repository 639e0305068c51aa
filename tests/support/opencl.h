#pragma once
// For tests that need an OpenCL device outside tests/opencl/: built with the OpenCL runtime, a
// missing device fails the test (ctest provides two PoCL devices); built without it
// (-DTESSERA_OPENCL=OFF), the test is skipped, saying so.
#include <gtest/gtest.h>

#include "tessera/device.h"

#if TESSERA_HAVE_OPENCL
#define TESSERA_REQUIRE_OPENCL_DEVICE(name)                      \
  ASSERT_NE(::tessera::Registry::instance().find(name), nullptr) \
      << name << " is missing (POCL_DEVICES=\"pthread pthread\" provides it)"
#else
#define TESSERA_REQUIRE_OPENCL_DEVICE(name) GTEST_SKIP() << "built without OpenCL (TESSERA_OPENCL=OFF)"
#endif
