#pragma once
// ASan and TSan reserve terabytes of shadow address space at start, so a process of theirs cannot
// run under `ulimit -v` / RLIMIT_AS at all. Tests of behaviour under an address-space limit skip in
// those builds, saying why; the release and release-noocl runs cover them.
#include <gtest/gtest.h>

namespace tessera::testing_support {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kShadowMemorySanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kShadowMemorySanitizer = true;
#else
inline constexpr bool kShadowMemorySanitizer = false;
#endif
#else
inline constexpr bool kShadowMemorySanitizer = false;
#endif

}  // namespace tessera::testing_support

#define TESSERA_SKIP_WITHOUT_ADDRESS_SPACE_LIMITS()                                                         \
  do {                                                                                                      \
    if (::tessera::testing_support::kShadowMemorySanitizer)                                                 \
      GTEST_SKIP() << "this sanitizer's shadow memory cannot run under an address-space limit (ulimit -v)"; \
  } while (false)
