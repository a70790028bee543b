#include "vllm_check.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <fstream>
#include <nlohmann/json.hpp>

namespace lf {

namespace fs = std::filesystem;

namespace {

// vLLM's --max-lora-rank: its default, and the largest value it accepts.
constexpr int64_t kVllmDefaultMaxLoraRank = 16;
constexpr int64_t kVllmLargestLoraRank = 512;

nlohmann::json read_json(const fs::path& p, std::vector<std::string>& problems) {
  std::ifstream in(p);
  if (!in) {
    problems.push_back(fmt::format("{} is missing", p.string()));
    return nlohmann::json::object();
  }
  auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    problems.push_back(fmt::format("{} is not a JSON object", p.string()));
    return nlohmann::json::object();
  }
  return j;
}

void check_weights(const fs::path& dir, std::vector<std::string>& problems) {
  if (fs::exists(dir / "model.safetensors")) return;
  const auto index = dir / "model.safetensors.index.json";
  if (!fs::exists(index)) {
    problems.push_back(fmt::format("{} has neither model.safetensors nor model.safetensors.index.json", dir.string()));
    return;
  }
  const auto j = read_json(index, problems);
  if (!j.contains("weight_map") || !j["weight_map"].is_object()) {
    problems.push_back(fmt::format("{} has no weight_map", index.string()));
    return;
  }
  for (const auto& [name, file] : j["weight_map"].items())
    if (!file.is_string() || !fs::exists(dir / file.get<std::string>())) {
      problems.push_back(fmt::format("{}: {} is in {}, which is missing", index.string(), name, file.dump()));
      return;
    }
}

void check_chat_template(const fs::path& dir, std::vector<std::string>& problems) {
  const auto tc = dir / "tokenizer_config.json";
  if (!fs::exists(tc)) {
    problems.push_back(fmt::format("{} is missing: vLLM loads the tokenizer from the model folder", tc.string()));
    return;
  }
  std::vector<std::string> ignored;
  const auto j = read_json(tc, ignored);
  if (!j.contains("chat_template") && !fs::exists(dir / "chat_template.jinja"))
    problems.push_back(fmt::format("{} has no chat_template (nor chat_template.jinja): vLLM's chat API "
                                   "(/v1/chat/completions) refuses requests unless given --chat-template FILE",
                                   tc.string()));
}

}  // namespace

std::vector<std::string> vllm_model_folder_problems(const fs::path& dir, const fs::path& base) {
  std::vector<std::string> problems;
  const auto cfg = read_json(dir / "config.json", problems);
  if (!cfg.empty()) {
    if (!cfg.contains("architectures") || !cfg["architectures"].is_array() || cfg["architectures"].empty())
      problems.push_back(fmt::format("{}/config.json has no `architectures`: vLLM cannot pick a model class",
                                     dir.string()));
    if (!cfg.contains("torch_dtype") && !cfg.contains("dtype"))
      problems.push_back(fmt::format("{}/config.json has no `torch_dtype`: vLLM's --dtype auto would guess",
                                     dir.string()));
  }
  check_weights(dir, problems);
  check_chat_template(dir, problems);
  if (!base.empty() && fs::exists(base / "generation_config.json") && !fs::exists(dir / "generation_config.json"))
    problems.push_back(fmt::format("{} has no generation_config.json though the base {} has one: vLLM would sample "
                                   "with its own defaults, not the model's", dir.string(), base.string()));
  return problems;
}

std::vector<std::string> vllm_adapter_problems(const fs::path& dir) {
  std::vector<std::string> problems;
  const auto cfg_path = dir / "adapter_config.json";
  const auto j = read_json(cfg_path, problems);
  if (j.empty()) return problems;
  for (const char* key : {"r", "lora_alpha", "target_modules"})
    if (!j.contains(key) || j[key].is_null())
      problems.push_back(fmt::format("{} has no `{}`: vLLM's LoRA loader reads it", cfg_path.string(), key));
  if (j.value("bias", std::string("none")) != "none")
    problems.push_back(fmt::format("{}: `bias: {}`: vLLM serves LoRA adapters with bias none only",
                                   cfg_path.string(), j.value("bias", std::string())));
  if (j.contains("modules_to_save") && !j["modules_to_save"].is_null() && !j["modules_to_save"].empty())
    problems.push_back(fmt::format("{}: modules_to_save {} (additional_target): vLLM refuses adapters that replace "
                                   "whole modules beside LoRA (only lm_head / embed_tokens, with "
                                   "--enable-lora-bias / --lora-extra-vocab-size where supported); merge with "
                                   "`lf-train export` and serve the merged model instead",
                                   cfg_path.string(), j["modules_to_save"].dump()));
  // vLLM's PEFTHelper refuses DoRA ("vLLM does not yet support DoRA").
  if (j.value("use_dora", false))
    problems.push_back(fmt::format("{}: use_dora: vLLM does not serve DoRA adapters; merge with `lf-train export` "
                                   "and serve the merged model", cfg_path.string()));
  if (j.contains("r") && j["r"].is_number_integer()) {
    const auto r = j["r"].get<int64_t>();
    if (r > kVllmLargestLoraRank)
      problems.push_back(fmt::format("{}: r {} is above {}, the largest --max-lora-rank vLLM accepts: vLLM refuses "
                                     "it; merge with `lf-train export` and serve the merged model",
                                     cfg_path.string(), r, kVllmLargestLoraRank));
    else if (r > kVllmDefaultMaxLoraRank)
      problems.push_back(fmt::format("{}: r {} is above vLLM's default --max-lora-rank {}: serve it with "
                                     "--max-lora-rank {}", cfg_path.string(), r, kVllmDefaultMaxLoraRank,
                                     r <= 32 ? 32 : r <= 64 ? 64 : r <= 128 ? 128 : r <= 256 ? 256 : r <= 320 ? 320 : 512));
  }
  return problems;
}

// Python's shlex.quote: as is when safe, else in single quotes (a path with spaces is one word).
static std::string shell_word(const std::string& s) {
  const bool safe = !s.empty() && s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
                                                       "@%+=:,./-_") == std::string::npos;
  if (safe) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\"'\"'") : std::string(1, c);
  return q + "'";
}

void report_vllm_readiness(const fs::path& dir, const fs::path& base) {
  const bool adapter = fs::exists(dir / "adapter_config.json");
  if (!adapter && !fs::exists(dir / "config.json")) return;
  const auto problems = adapter ? vllm_adapter_problems(dir) : vllm_model_folder_problems(dir, base);
  for (const auto& p : problems) spdlog::warn("vLLM: {}", p);
  if (!problems.empty()) return;
  if (adapter)
    spdlog::info("vLLM: serve it with `vllm serve {} --enable-lora --lora-modules {}`", shell_word(base.string()),
                 shell_word(dir.filename().string() + "=" + dir.string()));
  else
    spdlog::info("vLLM: serve it with `vllm serve {}`", shell_word(dir.string()));
}

}  // namespace lf
