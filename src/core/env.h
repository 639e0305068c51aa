#pragma once
// Environment knobs (TESSERA_*), parsed one way everywhere: unset or empty means the default; a
// value that does not parse is ignored with a warning that names the variable, the value and the
// default used instead. Callers read a knob once (at start-up or construction), not per op.
#include <cstdint>
#include <optional>
#include <string>

namespace tessera {

// The value, or nullopt when unset or empty.
std::optional<std::string> env_string(const char* name);
// A whole number in [min, max]; nullopt when unset, empty or junk (junk warns).
std::optional<int64_t> env_int(const char* name, int64_t min, int64_t max);
// env_int, or `fallback`.
int64_t env_int_or(const char* name, int64_t fallback, int64_t min, int64_t max);
// 1/true/yes/on and 0/false/no/off (any case); unset or empty = fallback; junk warns, = fallback.
bool env_flag(const char* name, bool fallback = false);

}  // namespace tessera
