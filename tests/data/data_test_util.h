#pragma once
// Data-test helpers on top of the tokenizer tests' asset helpers.
#include <unistd.h>

#include <fstream>

#include "../tokenizer/test_assets.h"

namespace lf::test {

// The tokenizer as LLaMA-Factory's pipeline (transformers) sees it.
inline const Tokenizer& data_tokenizer(const std::string& name) {
  return cached_tokenizer(name, TokenizerFlavor::kTransformers);
}

inline std::filesystem::path temp_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("lf_data_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

inline void write_file(const std::filesystem::path& p, const std::string& s) { std::ofstream(p) << s; }

}  // namespace lf::test
