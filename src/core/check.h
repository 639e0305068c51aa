#pragma once
// Internal helpers to raise tessera::Error with formatted context.
#include <fmt/format.h>

#include "tessera/error.h"

namespace tessera {

template <typename... Args>
[[noreturn]] void raise(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(code, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace tessera
