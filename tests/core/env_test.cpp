// Environment knobs parse one way: unset/empty = default, junk = a warning naming the variable.
#include "core/env.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "tessera/log.h"

using namespace tessera;

namespace {

// Captures warnings and sets one variable for a scope.
class EnvScope {
 public:
  EnvScope(const char* name, const char* value) : name_(name) {
    setenv(name, value, 1);
    set_log_callback([this](LogLevel level, std::string_view m) {
      if (level == LogLevel::Warn) warnings.emplace_back(m);
    });
  }
  ~EnvScope() {
    unsetenv(name_);
    set_log_callback(nullptr);
  }
  std::vector<std::string> warnings;

 private:
  const char* name_;
};

constexpr const char* kVar = "TESSERA_TEST_KNOB";

}  // namespace

TEST(Env, UnsetAndEmptyMeanTheDefault) {
  unsetenv(kVar);
  EXPECT_FALSE(env_string(kVar).has_value());
  EXPECT_EQ(env_int_or(kVar, 7, 0, 100), 7);
  EnvScope e(kVar, "");
  EXPECT_FALSE(env_string(kVar).has_value());
  EXPECT_EQ(env_int_or(kVar, 7, 0, 100), 7);
  EXPECT_TRUE(env_flag(kVar, true));
  EXPECT_TRUE(e.warnings.empty());
}

TEST(Env, WholeNumbersInRange) {
  EnvScope e(kVar, "42");
  EXPECT_EQ(env_int(kVar, 0, 100), 42);
  EXPECT_EQ(env_int_or(kVar, 7, 0, 100), 42);
  EXPECT_TRUE(e.warnings.empty());
}

TEST(Env, JunkWarnsNamingVariableValueAndDefault) {
  for (const char* junk : {"12abc", "abc", "-1", "101", "99999999999999999999999", " 5"}) {
    EnvScope e(kVar, junk);
    EXPECT_EQ(env_int_or(kVar, 7, 0, 100), 7) << junk;
    ASSERT_EQ(e.warnings.size(), 1u) << junk;
    EXPECT_NE(e.warnings[0].find(kVar), std::string::npos) << e.warnings[0];
    EXPECT_NE(e.warnings[0].find(junk), std::string::npos) << e.warnings[0];
    EXPECT_NE(e.warnings[0].find("using 7"), std::string::npos) << e.warnings[0];
  }
}

TEST(Env, Flags) {
  for (const char* on : {"1", "true", "YES", "On"}) {
    EnvScope e(kVar, on);
    EXPECT_TRUE(env_flag(kVar)) << on;
    EXPECT_TRUE(e.warnings.empty());
  }
  for (const char* off : {"0", "false", "No", "OFF"}) {
    EnvScope e(kVar, off);
    EXPECT_FALSE(env_flag(kVar, true)) << off;
  }
  EnvScope e(kVar, "maybe");
  EXPECT_FALSE(env_flag(kVar));
  ASSERT_EQ(e.warnings.size(), 1u);
  EXPECT_NE(e.warnings[0].find("maybe"), std::string::npos);
}
