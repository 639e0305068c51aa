// Built by tests/layers/CMakeLists.txt with TESSERA_LAYER_CHECK_HEADER set to one internal header.
#include TESSERA_LAYER_CHECK_HEADER
