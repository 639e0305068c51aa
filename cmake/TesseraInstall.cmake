# What `cmake --install` puts under the prefix, for programs built elsewhere:
#   include/tessera.h, include/tessera/**      the C and the C++ API
#   lib/libtessera.so                           the C API (tessera::c, pkg-config tessera)
#   lib/libtessera-cxx.so                       every layer, for the C++ API (tessera::tessera,
#                                               pkg-config tessera-cxx)
#   bin/tessera                                 the CLI
#   lib/cmake/tessera/                          find_package(tessera)
#   lib/pkgconfig/tessera.pc, tessera-cxx.pc
# Inside this tree the CLI and the tests keep linking the static layers (the INTERFACE target
# `tessera`); the installed C++ library is those layers whole in one shared object.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

get_property(tessera_runtime_targets GLOBAL PROPERTY TESSERA_RUNTIME_TARGETS)
set(tessera_cxx_layers tessera_core tessera_backend tessera_cpu tessera_device ${tessera_runtime_targets}
    tessera_runtimes tessera_llm tessera_mpi tessera_server tessera_conformance)
set(tessera_cxx_source ${CMAKE_BINARY_DIR}/generated/tessera_cxx.cpp)
file(WRITE ${tessera_cxx_source} "// libtessera-cxx is the static layers, whole (cmake/TesseraInstall.cmake).\n")
add_library(tessera_cxx SHARED ${tessera_cxx_source})
# Every object of every layer (--whole-archive, before the objects), then the layers again as
# usual so that their own dependencies (fmt, PCRE2, OpenCL, ...) follow them.
set(tessera_cxx_archives)
foreach(layer ${tessera_cxx_layers})
  list(APPEND tessera_cxx_archives $<TARGET_FILE:${layer}>)
endforeach()
target_link_options(tessera_cxx PRIVATE LINKER:--whole-archive ${tessera_cxx_archives} LINKER:--no-whole-archive)
target_link_libraries(tessera_cxx PRIVATE ${tessera_cxx_layers} PUBLIC nlohmann_json::nlohmann_json)
target_include_directories(tessera_cxx INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                                                 $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(tessera_cxx INTERFACE cxx_std_20)
set_target_properties(tessera_cxx PROPERTIES OUTPUT_NAME tessera-cxx VERSION ${PROJECT_VERSION}
                      SOVERSION ${PROJECT_VERSION_MAJOR} EXPORT_NAME tessera)

# The installed CLI finds the libraries next to it.
set_target_properties(tessera_cli PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")

install(TARGETS tessera_c tessera_cxx EXPORT tesseraTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS tessera_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/tessera.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/tessera DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(tessera_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/tessera)
install(EXPORT tesseraTargets NAMESPACE tessera:: DESTINATION ${tessera_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tesseraConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/tesseraConfig.cmake INSTALL_DESTINATION ${tessera_cmake_dir})
# Before 1.0 a minor version may change the API (include/tessera.h says so).
write_basic_package_version_file(${CMAKE_BINARY_DIR}/tesseraConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/tesseraConfig.cmake ${CMAKE_BINARY_DIR}/tesseraConfigVersion.cmake
        DESTINATION ${tessera_cmake_dir})

foreach(pc tessera tessera-cxx)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${pc}.pc.in ${CMAKE_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/${pc}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()
