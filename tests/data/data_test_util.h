#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <unistd.h>

#include "lf/tokenizer/tokenizer.h"

namespace lf::test {

inline std::filesystem::path assets_dir() { return LF_ASSETS_DIR "/tokenizers"; }
inline std::filesystem::path fixtures_dir() { return LF_FIXTURES_DIR; }
inline bool have_assets() { return std::filesystem::exists(assets_dir() / "qwen2" / "tokenizer.json"); }

#define LF_REQUIRE_ASSETS()                                                              \
  do {                                                                                   \
    if (!::lf::test::have_assets())                                                      \
      GTEST_SKIP() << "shared tokenizer assets not found at " << ::lf::test::assets_dir() \
                   << " (expected ../shared/assets beside the repo)";                    \
  } while (0)

inline const Tokenizer& cached_tokenizer(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, Tokenizer> cache;
  std::lock_guard lock(mu);
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, Tokenizer::load(assets_dir() / name, TokenizerFlavor::kTransformers)).first;
  return it->second;
}

inline std::filesystem::path temp_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("lf_data_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

inline void write_file(const std::filesystem::path& p, const std::string& s) { std::ofstream(p) << s; }

}  // namespace lf::test
