# The layer rule, enforced by the build (docs/ARCHITECTURE.md):
#   tessera_add_layer(<name> [DEPENDS <layer>...])
#     The static library tessera_<name> from every src/<name>/**/*.cpp. Its include root holds only
#     the link <name> -> src/<name>, so `#include "<name>/x.h"` compiles only in code that links
#     tessera_<name>. DEPENDS are linked PRIVATE: a layer sees the layers it names, nothing above
#     them and nothing they see.
#   tessera_add_runtime(<name> <factory>)
#     Registers the layer tessera_<name> as a runtime: <factory> (a fully qualified
#     `void f(std::vector<std::unique_ptr<tessera::Device>>&)`) adds its devices to the Registry.
#   tessera_add_runtimes_target()
#     After every runtime: tessera_runtimes, whose generated source defines Registry::instance()
#     (the CPU first, then each runtime's factory in the order the runtimes were added).

set(TESSERA_INCLUDE_ROOTS ${CMAKE_BINARY_DIR}/include_roots)

function(tessera_add_layer name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "DEPENDS")
  set(dir ${PROJECT_SOURCE_DIR}/src/${name})
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${dir}/*.cpp)
  add_library(tessera_${name} STATIC ${sources})
  set(root ${TESSERA_INCLUDE_ROOTS}/${name})
  if(NOT IS_SYMLINK ${root}/${name})
    file(MAKE_DIRECTORY ${root})
    file(CREATE_LINK ${dir} ${root}/${name} SYMBOLIC)
  endif()
  target_include_directories(tessera_${name} PUBLIC ${root} ${PROJECT_SOURCE_DIR}/include)
  list(TRANSFORM arg_DEPENDS PREPEND tessera_)
  target_link_libraries(tessera_${name} PRIVATE ${arg_DEPENDS} fmt::fmt Threads::Threads)
  set_target_properties(tessera_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
endfunction()

function(tessera_add_runtime name factory)
  if(NOT TARGET tessera_${name})
    message(FATAL_ERROR "tessera_add_runtime(${name}): define the layer first (tessera_add_layer)")
  endif()
  set_property(GLOBAL APPEND PROPERTY TESSERA_RUNTIME_TARGETS tessera_${name})
  set_property(GLOBAL APPEND PROPERTY TESSERA_RUNTIME_FACTORIES ${factory})
endfunction()

function(tessera_add_runtimes_target)
  get_property(targets GLOBAL PROPERTY TESSERA_RUNTIME_TARGETS)
  get_property(factories GLOBAL PROPERTY TESSERA_RUNTIME_FACTORIES)
  set(TESSERA_FACTORY_DECLARATIONS "")
  set(TESSERA_FACTORY_LIST "")
  set(TESSERA_FACTORY_COUNT 0)
  foreach(factory ${factories})
    string(REGEX MATCH "^(.+)::([A-Za-z_][A-Za-z0-9_]*)$" qualified "${factory}")
    if(NOT qualified)
      message(FATAL_ERROR "runtime factory '${factory}' must be namespace-qualified (tessera::x::register_devices)")
    endif()
    string(APPEND TESSERA_FACTORY_DECLARATIONS
      "namespace ${CMAKE_MATCH_1} {\nvoid ${CMAKE_MATCH_2}(std::vector<std::unique_ptr<::tessera::Device>>& devices);\n}\n")
    string(APPEND TESSERA_FACTORY_LIST "    &::${factory},\n")
    math(EXPR TESSERA_FACTORY_COUNT "${TESSERA_FACTORY_COUNT} + 1")
  endforeach()
  set(source ${CMAKE_BINARY_DIR}/generated/registry_instance.cpp)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/registry_instance.cpp.in ${source} @ONLY)
  add_library(tessera_runtimes STATIC ${source})
  target_include_directories(tessera_runtimes PRIVATE ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(tessera_runtimes PRIVATE tessera_backend tessera_cpu ${targets})
  set_target_properties(tessera_runtimes PROPERTIES POSITION_INDEPENDENT_CODE ON)
  list(JOIN factories ", " listed)
  message(STATUS "Tessera runtimes: the CPU, then [${listed}]")
endfunction()
