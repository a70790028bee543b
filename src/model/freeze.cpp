#include "lf/model/freeze.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <regex>
#include <set>

#include "lf/common/error.h"

namespace lf::model {

std::vector<NamedParam> apply_freeze(CausalLM& model, const FreezeConfig& c) {
  const int64_t n = model.num_layers();
  LF_CHECK(c.trainable_layers != 0, ConfigError,
           "freeze_trainable_layers is 0: no layer would train (N > 0: the last N layers, N < 0: the first -N)");
  std::vector<int64_t> ids;
  if (c.llama_pro) {
    // LLaMA-Factory's _setup_freeze_tuning: range(stride - 1, num_layers + stride - 1, stride), the expanded blocks
    // of scripts/llama_pro.py (which inserts one block after every num_layers / N original ones).
    LF_CHECK(c.trainable_layers > 0 && n % c.trainable_layers == 0, ConfigError,
             "use_llama_pro: the model's {} layers are not divisible by freeze_trainable_layers {} (LLaMA-Factory's "
             "rule: N expanded blocks, one after every num_layers / N); set freeze_trainable_layers to the number of "
             "blocks the expansion added",
             n, c.trainable_layers);
    const int64_t stride = n / c.trainable_layers;
    for (int64_t i = stride - 1; i < n; i += stride) ids.push_back(i);
  } else if (c.trainable_layers > 0)
    for (int64_t i = std::max<int64_t>(0, n - c.trainable_layers); i < n; ++i) ids.push_back(i);
  else
    for (int64_t i = 0; i < std::min(-c.trainable_layers, n); ++i) ids.push_back(i);
  auto params = model.named_parameters();
  // LLaMA-Factory's module names: those after ".0." (hidden), the second-to-last of names outside
  // the layers (non-hidden).
  std::set<std::string> hidden, other;
  static const std::regex kLayer(R"(\.\d+\.)");
  for (const auto& p : params) {
    if (const auto at = p.name.find(".0."); at != std::string::npos) {
      const auto rest = p.name.substr(at + 3);
      hidden.insert(rest.substr(0, rest.find('.')));
    }
    if (!std::regex_search(p.name, kLayer)) {
      const auto last = p.name.rfind('.');
      const auto prev = p.name.rfind('.', last - 1);
      other.insert(p.name.substr(prev == std::string::npos ? 0 : prev + 1, last - (prev == std::string::npos ? 0 : prev + 1)));
    }
  }
  std::vector<std::string> patterns;
  for (const auto& m : c.trainable_modules) {
    LF_CHECK(m == "all" || hidden.count(m), ConfigError,
             "freeze_trainable_modules: module '{}' is not found; choose from {} (or all)", m, fmt::join(hidden, ", "));
    for (const auto i : ids) patterns.push_back(fmt::format(".{}.{}", i, m == "all" ? "" : m));
  }
  for (const auto& m : c.extra_modules) {
    LF_CHECK(other.count(m), ConfigError, "freeze_extra_modules: module '{}' is not found; choose from {}", m,
             fmt::join(other, ", "));
    patterns.push_back(m);
  }
  std::vector<NamedParam> out;
  for (auto& p : params) {
    bool train = false;
    for (const auto& pat : patterns) train = train || p.name.find(pat) != std::string::npos;
    p.tensor->set_requires_grad(train);
    if (train) out.push_back(p);
  }
  LF_CHECK(!out.empty(), ConfigError, "finetuning_type freeze: no parameter is trainable");
  model.set_partly_frozen(true);
  return out;
}

}  // namespace lf::model
