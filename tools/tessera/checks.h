#pragma once
// Range checks for numeric flags. CLI11's own print their bounds with %f, so an open upper bound
// (DBL_MAX) comes out as a 300-digit number; these print the bound that matters, as %g does.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <string>

namespace tessera::cli {

namespace detail {

// The text as a number, or an error naming it when it is none.
inline std::string parse_number(const std::string& text, double& value) {
  char* end = nullptr;
  value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size()) return fmt::format("'{}' is not a number", text);
  return "";
}

}  // namespace detail

inline CLI::Validator at_least(double min) {
  return CLI::Validator(
      [min](std::string& text) -> std::string {
        double v = 0;
        if (auto e = detail::parse_number(text, v); !e.empty()) return e;
        return v >= min ? "" : fmt::format("{} is less than {:g}", text, min);
      },
      fmt::format("NUMBER >= {:g}", min));
}

inline CLI::Validator non_negative() { return at_least(0); }

inline CLI::Validator positive() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double v = 0;
        if (auto e = detail::parse_number(text, v); !e.empty()) return e;
        return v > 0 ? "" : fmt::format("{} is not greater than 0", text);
      },
      "NUMBER > 0");
}

inline CLI::Validator in_range(double min, double max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        double v = 0;
        if (auto e = detail::parse_number(text, v); !e.empty()) return e;
        return v >= min && v <= max ? "" : fmt::format("{} is not in the range {:g} to {:g}", text, min, max);
      },
      fmt::format("NUMBER in [{:g}, {:g}]", min, max));
}

}  // namespace tessera::cli
