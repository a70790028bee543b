// lf-data-bench: times the SFT data path (read + convert + template +
// tokenize + cache write), then the cached reload, for a LLaMA-Factory YAML.
//   lf-data-bench CONFIG.yaml [key=value ...]
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>

#include "lf/common/error.h"
#include "lf/config/train_config.h"
#include "lf/data/sft_dataset.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: lf-data-bench CONFIG.yaml [key=value ...]\n";
    return 2;
  }
  try {
    std::vector<std::string> overrides(argv + 2, argv + argc);
    lf::DataArgs args = lf::config::load_train_config(argv[1], overrides).plan.data;
    auto t0 = std::chrono::steady_clock::now();
    lf::Tokenizer tok = lf::load_tokenizer_for(args);
    auto t1 = std::chrono::steady_clock::now();
    lf::SftData cold = lf::load_sft_data(args, tok);
    auto t2 = std::chrono::steady_clock::now();
    lf::SftData warm = lf::load_sft_data(args, tok);
    auto t3 = std::chrono::steady_clock::now();
    auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
    std::cout << nlohmann::json{{"examples", cold.train.size()},
                                {"tokens", cold.train.num_tokens()},
                                {"tokenizer_load_s", secs(t0, t1)},
                                {"first_run_s", secs(t1, t2)},
                                {"first_from_cache", cold.from_cache},
                                {"cached_run_s", secs(t2, t3)},
                                {"cached_from_cache", warm.from_cache}}
                     .dump()
              << std::endl;
  } catch (const lf::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return e.exit_code();
  }
  return 0;
}
