#pragma once
// Where the shared tokenizer assets live, and a cached loader so each test
// binary parses every tokenizer.json once.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <string>

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

// One parsed tokenizer per (name, flavor) per test binary. The data tests use the
// transformers flavor (what LLaMA-Factory's pipeline sees); the tokenizer tests the default.
inline const Tokenizer& cached_tokenizer(const std::string& name, TokenizerFlavor flavor = TokenizerFlavor::kTokenizers) {
  static std::mutex mu;
  static std::map<std::pair<std::string, TokenizerFlavor>, Tokenizer> cache;
  std::lock_guard lock(mu);
  auto key = std::make_pair(name, flavor);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, Tokenizer::load(assets_dir() / name, flavor)).first;
  return it->second;
}

}  // namespace lf::test
