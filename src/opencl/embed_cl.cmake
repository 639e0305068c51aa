# Turns one OpenCL C file into a C++ header holding it as a raw string:
#   cmake -DINPUT=kernels/copy.cl -DOUTPUT=.../copy.cl.h -DNAME=copy -P embed_cl.cmake
file(READ "${INPUT}" content)
string(FIND "${content}" ")tessera_cl\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter")
endif()
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${INPUT} by embed_cl.cmake; do not edit.\n"
  "#pragma once\n#include <string_view>\n\n"
  "namespace tessera::opencl::kernels {\n"
  "inline constexpr std::string_view ${NAME} = R\"tessera_cl(${content})tessera_cl\";\n"
  "}  // namespace tessera::opencl::kernels\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
