// The AVX-512 K-quant tiles built again with AVX512-VBMI for the formats whose grid points it
// decodes by byte permutes (see mul_mat_kquants_avx512.cpp); installed where the CPU has VBMI.
#define TESSERA_KQUANT_VBMI 1
#include "cpu/ops/mul_mat_kquants_avx512.cpp"
