// lf-tokenize-bench: encode throughput of lf::Tokenizer on a JSONL corpus of
// {"text": ...} (or {"t": ...}) lines, on 1..N threads. Prints one JSON line
// per thread count: {"threads", "mb_per_s", "tokens_per_s", "tokens", "seconds"}.
//   lf-tokenize-bench --tokenizer DIR --corpus FILE [--threads 1,2] [--repeat 3]
#include <CLI/CLI.hpp>
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "lf/common/error.h"
#include "lf/tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  CLI::App app{"lf-tokenize-bench"};
  std::string tokenizer, corpus;
  std::vector<int> threads{1, 2};
  int repeat = 3;
  app.add_option("--tokenizer", tokenizer)->required();
  app.add_option("--corpus", corpus)->required();
  app.add_option("--threads", threads)->delimiter(',');
  app.add_option("--repeat", repeat);
  CLI11_PARSE(app, argc, argv);
  try {
    lf::Tokenizer tok = lf::Tokenizer::load(tokenizer);
    std::vector<std::string> texts;
    size_t bytes = 0;
    std::ifstream in(corpus);
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line);
      texts.push_back(j.contains("text") ? j["text"].get<std::string>() : j["t"].get<std::string>());
      bytes += texts.back().size();
    }
    for (int t : threads) {
      double best = 1e30;
      size_t tokens = 0;
      for (int r = 0; r < repeat; ++r) {
        // A fresh tokenizer each round: the word cache starts cold, as in HF's
        // first pass over a dataset.
        lf::Tokenizer cold = lf::Tokenizer::load(tokenizer);
        auto t0 = std::chrono::steady_clock::now();
        auto ids = cold.encode_batch(texts, false, t);
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        tokens = 0;
        for (const auto& v : ids) tokens += v.size();
        best = std::min(best, s);
      }
      std::cout << nlohmann::json{{"impl", "lf"}, {"threads", t}, {"bytes", bytes}, {"tokens", tokens},
                                  {"seconds", best}, {"mb_per_s", bytes / best / 1e6},
                                  {"tokens_per_s", tokens / best}}
                       .dump()
                << std::endl;
    }
  } catch (const lf::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return e.exit_code();
  }
  return 0;
}
