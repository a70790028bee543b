// The LF_* registry: typed reads with defaults and clear errors, and the sources read
// and name only registered knobs.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <functional>
#include <optional>
#include <fstream>
#include <regex>
#include <set>

#include "lf/common/env_knobs.h"
#include "lf/common/error.h"
#include "../support/scoped_env.h"

namespace fs = std::filesystem;

namespace {

using lf::test::ScopedEnv;

std::string error_of(const std::function<void()>& read) {
  try {
    read();
  } catch (const lf::ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(EnvKnobs, UnsetReadsTheRegisteredDefaultOrNothing) {
  ScopedEnv a("LF_LOG_LEVEL", nullptr), b("LF_RDZV_PORT", ""), c("LF_PROGRESS_SAVE_TIMEOUT_S", nullptr);
  EXPECT_EQ(lf::knob_string("LF_LOG_LEVEL").value(), "info");
  EXPECT_FALSE(lf::knob_int("LF_RDZV_PORT").has_value());  // empty is unset; no default
  EXPECT_DOUBLE_EQ(lf::knob_number("LF_PROGRESS_SAVE_TIMEOUT_S").value(), 1800);
  EXPECT_TRUE(lf::knob_bool("LF_DDP_GRAD_SINK").value());
  EXPECT_FALSE(lf::knob_bool("LF_COMM_CHECK").has_value());
  EXPECT_FALSE(lf::knob_is_set("LF_LOG_LEVEL"));
}

TEST(EnvKnobs, SetValuesAreTyped) {
  ScopedEnv a("LF_RDZV_PORT", "29501"), b("LF_DDP_SPARSE_EMBEDDING", "1"), c("LF_PROGRESS_STEP_FACTOR", "2.5"),
      d("LF_COMM_CHECK", "0");
  EXPECT_EQ(lf::knob_int("LF_RDZV_PORT").value(), 29501);
  EXPECT_EQ(lf::knob_string("LF_DDP_SPARSE_EMBEDDING").value(), "1");
  EXPECT_DOUBLE_EQ(lf::knob_number("LF_PROGRESS_STEP_FACTOR").value(), 2.5);
  EXPECT_FALSE(lf::knob_bool("LF_COMM_CHECK").value());
  EXPECT_TRUE(lf::knob_is_set("LF_COMM_CHECK"));
}

TEST(EnvKnobs, MalformedValuesSayExpectedAndSeen) {
  {
    ScopedEnv e("LF_RDZV_PORT", "29x");
    const auto m = error_of([] { lf::knob_int("LF_RDZV_PORT"); });
    EXPECT_NE(m.find("environment variable LF_RDZV_PORT='29x': expected an integer"), std::string::npos) << m;
  }
  {
    ScopedEnv e("LF_DDP_SPARSE_EMBEDDING", "yes");
    const auto m = error_of([] { lf::knob_string("LF_DDP_SPARSE_EMBEDDING"); });
    EXPECT_NE(m.find("LF_DDP_SPARSE_EMBEDDING='yes': expected one of auto|0|1; unset means auto"), std::string::npos)
        << m;
  }
  {
    ScopedEnv e("LF_COMM_CHECK", "true");
    EXPECT_NE(error_of([] { lf::knob_bool("LF_COMM_CHECK"); }).find("expected 1 (on) or 0 (off)"), std::string::npos);
  }
  {
    ScopedEnv e("LF_WORKER_LIVENESS_TIMEOUT_S", "-3");
    EXPECT_NE(error_of([] { lf::knob_number("LF_WORKER_LIVENESS_TIMEOUT_S"); }).find("a number of seconds >= 0"),
              std::string::npos);
  }
  {
    ScopedEnv e("LF_LOG_LEVEL", "verbose");  // spdlog would read it as "off"
    EXPECT_NE(error_of([] { lf::knob_string("LF_LOG_LEVEL"); }).find("LF_LOG_LEVEL='verbose'"), std::string::npos);
  }
}

TEST(EnvKnobs, RegistryIsWellFormed) {
  std::set<std::string> names;
  for (const lf::EnvKnob& k : lf::env_knobs()) {
    EXPECT_TRUE(names.insert(std::string(k.name)).second) << k.name << " is registered twice";
    EXPECT_EQ(k.name.substr(0, 3), "LF_") << k.name;
    EXPECT_FALSE(k.meaning.empty()) << k.name;
    EXPECT_EQ(k.type == lf::KnobType::kChoice, !k.choices.empty()) << k.name;
  }
  EXPECT_EQ(lf::find_env_knob("LF_NOT_A_KNOB"), nullptr);
  ASSERT_NE(lf::find_env_knob("LF_JOB_TOKEN"), nullptr);
  // The heartbeat work's knobs are registered ahead of their readers.
  for (const char* k : {"LF_WORKER_LIVENESS_TIMEOUT_S", "LF_PROGRESS_STEP_FACTOR", "LF_PROGRESS_STEP_FLOOR_S",
                        "LF_PROGRESS_LOAD_TIMEOUT_S", "LF_PROGRESS_SAVE_TIMEOUT_S"})
    EXPECT_NE(lf::find_env_knob(k), nullptr) << k;
  const std::string md = lf::env_knobs_markdown();
  for (const auto& n : names) EXPECT_NE(md.find("`" + n + "`"), std::string::npos) << n;
}

// Every LF_* name inside a string literal of the sources is a registered knob (or one of the
// build's own options, named in messages), so a misspelt or unregistered knob fails here.
TEST(EnvKnobs, EveryLfNameInTheSourcesIsRegistered) {
  const std::set<std::string> build_options = {"LF_WITH_PARQUET", "LF_WITH_TORCH", "LF_WITH_CUDA", "LF_ARROW_DIR",
                                               "LF_PYTHON"};
  const std::regex literal(R"re("(?:[^"\\]|\\.)*")re"), name(R"(LF_[A-Z0-9_]+)");
  int files = 0;
  for (const char* top : {"src", "include"})
    for (const auto& e : fs::recursive_directory_iterator(fs::path(LF_SOURCE_DIR) / top)) {
      const auto ext = e.path().extension();
      if (ext != ".cpp" && ext != ".h" && ext != ".cu") continue;
      if (e.path().filename() == "env_knob_table.h") continue;
      ++files;
      std::ifstream in(e.path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n)
        for (std::sregex_iterator s(line.begin(), line.end(), literal), end; s != end; ++s) {
          const std::string lit = s->str();
          for (std::sregex_iterator t(lit.begin(), lit.end(), name); t != end; ++t)
            EXPECT_TRUE(lf::find_env_knob(t->str()) || build_options.count(t->str()))
                << e.path().string() << ":" << n << ": " << t->str()
                << " is not in include/lf/common/env_knob_table.h";
        }
    }
  EXPECT_GT(files, 50);
}

// Reads go through the registry's accessors. The files below read LF_* variables directly
// still, until their owners convert them (lf::knob_*); the list must shrink, never grow.
TEST(EnvKnobs, KnobsAreReadThroughTheRegistry) {
  const std::set<std::string> pending_conversion = {};  // every read is converted
  const std::regex direct(R"re((getenv|env_string|env_int)\s*\(\s*"LF_)re");
  std::set<std::string> still_direct;
  for (const char* top : {"src", "include"})
    for (const auto& e : fs::recursive_directory_iterator(fs::path(LF_SOURCE_DIR) / top)) {
      if (e.path().extension() != ".cpp" && e.path().extension() != ".h") continue;
      std::ifstream in(e.path());
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (!std::regex_search(text, direct)) continue;
      const std::string rel = fs::relative(e.path(), LF_SOURCE_DIR).string();
      still_direct.insert(rel);
      EXPECT_TRUE(pending_conversion.count(rel)) << rel << " reads an LF_* variable directly: use lf::knob_*";
    }
  for (const auto& f : pending_conversion)
    EXPECT_TRUE(still_direct.count(f)) << f << " reads through the registry now: remove it from pending_conversion";
}
