#pragma once
// Run-time instruction-set dispatch for the vectorized conversion and quantization rows.
//
// The vector code is compiled per function with TESSERA_TARGET_AVX2. FMA is deliberately left out:
// GCC contracts a separate multiply and add into an FMA when the ISA allows it, which rounds once
// instead of twice and would break bit-exactness with the scalar reference (Q4_0's x*id + 8.5).

#if defined(__x86_64__) || defined(__i386__)
#define TESSERA_HAVE_X86 1
#define TESSERA_TARGET_AVX2 __attribute__((target("avx2,f16c")))
#else
#define TESSERA_HAVE_X86 0
#endif

namespace tessera {

// True when the CPU (and the OS) support AVX2 and F16C; evaluated once.
bool cpu_has_avx2_f16c() noexcept;

}  // namespace tessera
