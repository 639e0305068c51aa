#pragma once
// The OpenCL C API at the 1.2 level (what every GPU driver and PoCL implement), and error helpers.
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <string>
#include <string_view>

namespace tessera::opencl {

// "CL_OUT_OF_RESOURCES", ... ("CL error -9999" for unknown codes).
std::string cl_error_name(cl_int err);

// Throws tessera::Error "<where>: <call> failed: <error name> (<code>)[: detail]" unless err is
// CL_SUCCESS; allocation failures become ErrorCode::OutOfMemory, the rest DeviceError.
void check(cl_int err, std::string_view where, std::string_view call, std::string_view detail = {});

}  // namespace tessera::opencl
