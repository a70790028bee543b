#include "lf/data/commands.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "lf/common/error.h"
#include "lf/config/train_config.h"
#include "lf/tokenizer/tokenizer.h"
#include "preview.h"

namespace lf {
namespace {

struct TokenizeOptions {
  std::string tokenizer;
  bool special = false;
  bool decode = false;
  bool skip_special = false;
  std::string flavor = "tokenizers";
  int threads = 0;
};

constexpr size_t kBatchLines = 8192;

void flush_encode(const Tokenizer& tok, const TokenizeOptions& o, std::vector<std::string>& texts) {
  auto all = tok.encode_batch(texts, o.special, o.threads);
  std::string buf;
  for (const auto& ids : all) {
    buf += "{\"ids\": [";
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) buf += ", ";
      buf += std::to_string(ids[i]);
    }
    buf += "]}\n";
  }
  std::cout << buf;
  texts.clear();
}

void run_tokenize(const TokenizeOptions& o) {
  Tokenizer tok = Tokenizer::load(o.tokenizer, o.flavor == "transformers" ? TokenizerFlavor::kTransformers
                                                                         : TokenizerFlavor::kTokenizers);
  std::ios::sync_with_stdio(false);
  std::vector<std::string> texts;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      LF_THROW(ConfigError, "stdin:{}: malformed JSON line: {}", line_no, e.what());
    }
    if (o.decode) {
      LF_CHECK(j.is_object() && j.contains("ids") && j["ids"].is_array(), ConfigError,
               "stdin:{}: expected {{\"ids\": [...]}} with --decode", line_no);
      std::vector<int32_t> ids;
      try {
        ids = j["ids"].get<std::vector<int32_t>>();
      } catch (const nlohmann::json::exception&) {
        LF_THROW(ConfigError, "stdin:{}: \"ids\" must be a list of integer token ids", line_no);
      }
      // An id the vocabulary does not have would be dropped from the text without a word.
      for (size_t k = 0; k < ids.size(); ++k)
        LF_CHECK(ids[k] >= 0 && ids[k] < tok.vocab_size() && !tok.id_to_token(ids[k]).empty(), ConfigError,
                 "stdin:{}: id {} (position {}) is not in the vocabulary of the tokenizer at {} (ids 0..{}): "
                 "were these ids made with another tokenizer?",
                 line_no, ids[k], k, o.tokenizer, tok.vocab_size() - 1);
      std::cout << nlohmann::json{{"text", tok.decode(ids, o.skip_special)}}.dump(
                       -1, ' ', false, nlohmann::json::error_handler_t::replace)
                << "\n";
      continue;
    }
    LF_CHECK(j.is_object() && j.contains("text") && j["text"].is_string(), ConfigError,
             "stdin:{}: expected {{\"text\": \"...\"}}", line_no);
    texts.push_back(j["text"].get<std::string>());
    if (texts.size() >= kBatchLines) flush_encode(tok, o, texts);
  }
  if (!texts.empty()) flush_encode(tok, o, texts);
  std::cout.flush();
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto opts = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "tokenize", "Tokenize JSONL {\"text\": ...} lines from stdin to {\"ids\": [...]} (or --decode back)");
  cmd->add_option("--tokenizer", opts->tokenizer,
                  "Folder with tokenizer.json (or encoder.json + vocab.bpe)")
      ->required();
  cmd->add_flag("--special", opts->special, "Apply the post-processor (e.g. a leading <s>)");
  cmd->add_flag("--decode", opts->decode, "Read {\"ids\": [...]} and write {\"text\": ...}");
  cmd->add_flag("--skip-special", opts->skip_special, "With --decode, drop special tokens");
  cmd->add_option("--threads", opts->threads, "Encoding threads (0: all cores)");
  cmd->add_option("--flavor", opts->flavor,
                  "Whose ids: 'tokenizers' (tokenizer.json as HF tokenizers runs it) or "
                  "'transformers' (as transformers 5's AutoTokenizer, which LLaMA-Factory uses)")
      ->check(CLI::IsMember({"tokenizers", "transformers"}));
  cmd->callback([opts] { run_tokenize(*opts); });
}

void add_preview_command(CLI::App& app) {
  struct PreviewOptions {
    std::string config;
    int n = 3;
    std::vector<std::string> overrides;
  };
  auto opts = std::make_shared<PreviewOptions>();
  CLI::App* cmd = app.add_subcommand(
      "preview", "Show the first training samples as the model sees them, masked spans marked");
  cmd->add_option("config", opts->config, "LLaMA-Factory YAML config")->required();
  cmd->add_option("--n", opts->n, "Number of samples to show");
  cmd->add_option("overrides", opts->overrides, "key=value overrides of the config");
  cmd->callback([opts] {
    run_preview(config::load_train_config(opts->config, opts->overrides).plan.data, opts->n, std::cout, ::isatty(1));
  });
}

}  // namespace lf
