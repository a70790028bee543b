#include <gtest/gtest.h>
#include <stdlib.h>

#include "lf/common/env.h"
#include "lf/common/error.h"
#include "lf/common/hash.h"

TEST(Check, CarriesTypeMessageAndLocation) {
  try {
    LF_CHECK(1 + 1 == 3, lf::ConfigError, "expected {} got {}", 3, 2);
    FAIL() << "no throw";
  } catch (const lf::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("expected 3 got 2"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("common_test.cpp:"), std::string::npos);
    EXPECT_EQ(e.exit_code(), lf::kExitConfig);
  }
}

TEST(Env, IntParsesAndRejectsGarbage) {
  setenv("LF_TEST_INT", "42", 1);
  EXPECT_EQ(lf::env_int("LF_TEST_INT").value(), 42);
  setenv("LF_TEST_INT", "4x", 1);
  EXPECT_THROW(lf::env_int("LF_TEST_INT"), lf::ConfigError);
  unsetenv("LF_TEST_INT");
  EXPECT_FALSE(lf::env_int("LF_TEST_INT").has_value());
}

TEST(Hash, Fnv1aKnownValue) {
  EXPECT_EQ(lf::fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(lf::hex64(lf::fnv1a64("a")), "af63dc4c8601ec8c");
}
