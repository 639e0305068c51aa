# The layer rule at link level: every Tessera symbol a layer's archive uses is defined in the layer
# itself or in the layers it links. Catches what the include roots cannot: a lower layer calling a
# higher layer's public API (public headers are visible to every layer).
#   cmake -DNM=nm -DLAYER=libtessera_cpu.a "-DBELOW=libtessera_backend.a;libtessera_core.a" -P check_symbols.cmake
function(symbols out)
  execute_process(COMMAND ${NM} ${ARGN} OUTPUT_VARIABLE text RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${NM} ${ARGN} failed")
  endif()
  string(REGEX MATCHALL "[^\n ]*7tessera[^\n ]*" found "${text}")
  set(${out} ${found} PARENT_SCOPE)
endfunction()

symbols(undefined -u ${LAYER})
symbols(defined -g --defined-only ${LAYER} ${BELOW})
list(REMOVE_DUPLICATES undefined)
list(REMOVE_ITEM undefined ${defined})
if(undefined)
  list(LENGTH undefined n)
  execute_process(COMMAND c++filt ${undefined} OUTPUT_VARIABLE names)
  message(FATAL_ERROR "${LAYER} uses ${n} symbol(s) of no layer below it:\n${names}")
endif()
message(STATUS "${LAYER}: every Tessera symbol it uses is its own or a lower layer's")
