#include "output_metadata.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "lf/common/error.h"
#include "lf/model/loader.h"

namespace lf::train {
namespace fs = std::filesystem;

namespace {

template <typename Json>
Json read_json_file(const fs::path& p) {
  std::ifstream in(p);
  LF_CHECK(in.good(), ConfigError, "cannot read {}", p.string());
  try {
    return Json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    LF_THROW(ConfigError, "{} is not valid JSON: {}", p.string(), e.what());
  }
}

template <typename Json>
void write_json_text(const fs::path& p, const Json& j) {
  const fs::path tmp = p.string() + ".tmp";
  {
    std::ofstream out(tmp);
    LF_CHECK(out.good(), ConfigError, "cannot write {}", tmp.string());
    out << j.dump(2) << "\n";
    out.flush();
    if (!out.good()) {
      out.close();
      std::error_code ignored;
      fs::remove(tmp, ignored);
      LF_THROW(ConfigError, "write to {} failed (disk full?); the partial file is removed", tmp.string());
    }
  }
  fs::rename(tmp, p);
}

nlohmann::json id_json(const std::optional<int32_t>& id) { return id ? nlohmann::json(*id) : nlohmann::json(); }

template <typename Json>
nlohmann::json value_or_null(const Json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() ? nlohmann::json() : nlohmann::json(*it);
}

// HF's GenerationConfig.from_model_config, as transformers writes it (defaults left out).
nlohmann::json generation_config_from(const nlohmann::ordered_json& cfg) {
  nlohmann::json g = {{"_from_model_config", true}};
  for (const char* k : {"bos_token_id", "eos_token_id", "pad_token_id"})
    if (cfg.contains(k) && !cfg[k].is_null()) g[k] = cfg[k];
  if (cfg.contains("transformers_version")) g["transformers_version"] = cfg["transformers_version"];
  return g;
}

}  // namespace

void save_tokenizer_files(const fs::path& src, const fs::path& dst, const OutputTokenizer* tok) {
  if (src.empty() || !fs::is_directory(src)) return;
  std::vector<std::string> files;
  for (const char* const* f = model::kModelSideFiles; *f; ++f)
    if (std::string(*f) != "generation_config.json") files.emplace_back(*f);  // the model's, not the tokenizer's
  files.insert(files.end(), {"encoder.json", "vocab.bpe"});
  for (const auto& f : files)
    if (fs::exists(src / f) && !fs::exists(dst / f)) fs::copy_file(src / f, dst / f);
  if (!tok || !fs::exists(dst / "tokenizer_config.json")) return;
  auto cfg = read_json_file<nlohmann::json>(dst / "tokenizer_config.json");  // HF: sort_keys
  cfg["eos_token"] = tok->eos_token;
  cfg["pad_token"] = tok->pad_token;
  // transformers 5 saves the template as chat_template.jinja, never inline.
  std::optional<std::string> inline_template;
  if (cfg.contains("chat_template") && cfg["chat_template"].is_string())
    inline_template = cfg["chat_template"].get<std::string>();
  cfg.erase("chat_template");
  write_json_text(dst / "tokenizer_config.json", cfg);
  const auto chat = tok->chat_template ? tok->chat_template : inline_template;
  if (chat) std::ofstream(dst / "chat_template.jinja", std::ios::binary) << *chat;
}

void align_model_metadata(const fs::path& dst, const OutputTokenizer& tok) {
  auto cfg = read_json_file<nlohmann::ordered_json>(dst / "config.json");
  const fs::path gen_path = dst / "generation_config.json";
  nlohmann::json gen = fs::exists(gen_path) ? read_json_file<nlohmann::json>(gen_path) : generation_config_from(cfg);
  // transformers' align_special_tokens, step by step.
  const nlohmann::json eos = tok.eos_id;
  bool new_eos = value_or_null(cfg, "eos_token_id") != eos;
  nlohmann::json gen_eos = value_or_null(gen, "eos_token_id");
  if (gen_eos.is_null()) {
    new_eos = true;
  } else {
    if (!gen_eos.is_array()) gen_eos = nlohmann::json::array({gen_eos});
    bool listed = false;
    for (const auto& e : gen_eos) listed = listed || e == eos;
    new_eos = new_eos || !listed;
  }
  if (new_eos) {
    cfg["eos_token_id"] = eos;
    nlohmann::json all = nlohmann::json::array({eos});
    for (const auto& e : gen_eos.is_array() ? gen_eos : nlohmann::json::array())
      if (!e.is_null()) all.push_back(e);
    gen_eos = all;
  }
  if (!gen_eos.is_null()) gen["eos_token_id"] = gen_eos;
  for (const auto& [key, want] : {std::pair{"bos_token_id", id_json(tok.bos_id)}, std::pair{"pad_token_id", nlohmann::json(tok.pad_id)}}) {
    if (value_or_null(cfg, key) == want && value_or_null(gen, key) == want) continue;
    cfg[key] = want;
    if (want.is_null()) gen.erase(key);  // GenerationConfig writes no default (None) value
    else gen[key] = want;
  }
  cfg["use_cache"] = false;  // LLaMA-Factory trains without the KV cache, and saves that config
  write_json_text(dst / "config.json", cfg);
  write_json_text(gen_path, gen);
}

}  // namespace lf::train
