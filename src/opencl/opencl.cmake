# The OpenCL runtime and op library (included by the top CMakeLists after `tessera` is defined).
# Kernel sources (kernels/*.cl) are embedded as C++ raw strings at build time.
file(GLOB_RECURSE TESSERA_OPENCL_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*.cpp)
file(GLOB TESSERA_OPENCL_KERNELS CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/kernels/*.cl)
set(TESSERA_GENERATED_DIR ${CMAKE_BINARY_DIR}/generated)
set(TESSERA_OPENCL_HEADERS)
foreach(cl_file ${TESSERA_OPENCL_KERNELS})
  get_filename_component(cl_name ${cl_file} NAME_WE)
  set(cl_header ${TESSERA_GENERATED_DIR}/opencl/kernels/${cl_name}.cl.h)
  add_custom_command(
    OUTPUT ${cl_header}
    COMMAND ${CMAKE_COMMAND} -DINPUT=${cl_file} -DOUTPUT=${cl_header} -DNAME=${cl_name}
            -P ${CMAKE_CURRENT_LIST_DIR}/embed_cl.cmake
    DEPENDS ${cl_file} ${CMAKE_CURRENT_LIST_DIR}/embed_cl.cmake
    COMMENT "Embedding OpenCL kernels ${cl_name}.cl"
    VERBATIM)
  list(APPEND TESSERA_OPENCL_HEADERS ${cl_header})
endforeach()
target_sources(tessera PRIVATE ${TESSERA_OPENCL_SOURCES} ${TESSERA_OPENCL_HEADERS})
target_include_directories(tessera PRIVATE ${TESSERA_GENERATED_DIR})
target_link_libraries(tessera PUBLIC OpenCL::OpenCL)
