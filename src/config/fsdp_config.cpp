#include "fsdp_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <sstream>

#include "did_you_mean.h"
#include "json_input.h"

namespace lf::config {

namespace {

using json = nlohmann::json;
using P = FsdpPolicy;

constexpr std::string_view kHybrid =
    "hybrid sharding shards within a node and replicates across nodes; lf-train shards over every rank of every node";
constexpr std::string_view kWrapNote =
    "accepted and unused: lf-train wraps its own decoder layers (each one a unit; the embedding and lm_head their "
    "own)";

constexpr std::string_view kWrapOnly = "fsdp: auto_wrap";  // no strategy named: full_shard (HF's default)

constexpr FsdpKey kOptions[] = {
    {"full_shard", P::kImplemented, "", "zero_stage 3: parameters, gradients and optimizer state sharded",
     "log:ZeRO-", "full_shard"},
    {"shard_grad_op", P::kImplemented, "", "zero_stage 2: gradients and optimizer state sharded", "log:ZeRO-",
     "shard_grad_op", kWrapOnly},
    {"no_shard", P::kImplemented, "", "zero_stage 0: data parallel (DDP)", "log:ZeRO-", "no_shard", kWrapOnly},
    {"offload", P::kImplemented, "", "offload: params (parameters and optimizer on the CPU; full_shard only)",
     "log:ZeRO-", "offload", kWrapOnly},
    {"auto_wrap", P::kWrap, "", kWrapNote},
    {"hybrid_shard", P::kRefused, "", kHybrid},
    {"hybrid_shard_zero2", P::kRefused, "", kHybrid},
};

constexpr FsdpKey kKeys[] = {
    {"reshard_after_forward", P::kImplemented, "true",
     "true (or full_shard): zero_stage 3; false (or shard_grad_op): zero_stage 2", "log:ZeRO-", "false", kWrapOnly},
    {"sharding_strategy", P::kImplemented, "",
     "accelerate's FULL_SHARD (3), SHARD_GRAD_OP (2), NO_SHARD (0); hybrid ones are refused", "log:ZeRO-",
     "\"SHARD_GRAD_OP\"", kWrapOnly},
    {"cpu_offload", P::kImplemented, "false", "true: offload params (parameters and optimizer on the CPU)",
     "log:ZeRO-", "true", kWrapOnly},
    {"offload_params", P::kImplemented, "false", "accelerate's name of cpu_offload", "log:ZeRO-", "true", kWrapOnly},
    {"transformer_layer_cls_to_wrap", P::kWrap, "null", kWrapNote},
    {"auto_wrap_policy", P::kWrap, "\"TRANSFORMER_BASED_WRAP\"", kWrapNote},
    {"min_num_params", P::kWrap, "0", kWrapNote},
    {"version", P::kNoEffect, "1|2", "which torch FSDP HF would run; lf-train shards on its own"},
    {"backward_prefetch", P::kNoEffect, "null", "lf-train always prefetches the previous unit in backward"},
    {"forward_prefetch", P::kNoEffect, "false|true", "lf-train always prefetches the next unit in forward"},
    {"limit_all_gathers", P::kNoEffect, "false|true", "lf-train holds at most the current and the prefetched unit"},
    {"use_orig_params", P::kNoEffect, "true", "lf-train shards frozen and trainable parameters alike"},
    {"sync_module_states", P::kNoEffect, "true", "every rank starts from the same weights anyway"},
    {"cpu_ram_efficient_loading", P::kNoEffect, "false", "lf-train loads each rank's weights itself"},
    {"activation_checkpointing", P::kNoEffect, "false",
     "lf-train checkpoints by gradient_checkpointing / disable_gradient_checkpointing (on by default)"},
    {"state_dict_type", P::kNoEffect, "\"FULL_STATE_DICT\"",
     "lf-train's checkpoints are per-rank shards and its outputs full HF weights, whatever this says"},
    {"xla", P::kRefused, "false", "PyTorch/XLA (TPU) FSDP is not supported"},
    {"xla_fsdp_v2", P::kRefused, "false", "PyTorch/XLA (TPU) FSDP is not supported"},
    {"xla_fsdp_grad_ckpt", P::kRefused, "false", "PyTorch/XLA (TPU) FSDP is not supported"},
    {"xla_fsdp_settings", P::kRefused, "null|{}", "PyTorch/XLA (TPU) FSDP is not supported"},
};

const FsdpKey* find_in(std::span<const FsdpKey> table, std::string_view name) {
  auto it = std::find_if(table.begin(), table.end(), [&](const FsdpKey& k) { return k.name == name; });
  return it == table.end() ? nullptr : &*it;
}

std::vector<std::string> names_of(std::span<const FsdpKey> table) {
  std::vector<std::string> out;
  for (const auto& k : table) out.emplace_back(k.name);
  return out;
}

std::string lower(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

bool at_default(const json& v, std::string_view alternatives) {
  if (alternatives.empty()) return v.is_null();
  while (true) {
    const auto bar = alternatives.find('|');
    if (json::parse(std::string(alternatives.substr(0, bar))) == v) return true;
    if (bar == std::string_view::npos) return false;
    alternatives.remove_prefix(bar + 1);
  }
}

// HF reads fsdp_config's booleans with str_to_bool(str(value).lower()).
std::optional<bool> as_bool(const json& v) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_string()) {
    const std::string s = lower(v.get<std::string>());
    if (s == "true" || s == "1") return true;
    if (s == "false" || s == "0") return false;
  }
  if (v.is_number_integer()) return v.get<int64_t>() != 0;
  return std::nullopt;
}

// A sharding strategy's stage: 3, 2, 0; -1 when refused (hybrid), -2 when not a strategy.
int strategy_stage(const json& v) {
  if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    return i == 1 ? 3 : i == 2 ? 2 : i == 3 ? 0 : (i == 4 || i == 5) ? -1 : -2;
  }
  if (!v.is_string()) return -2;
  std::string s = lower(v.get<std::string>());
  if (!s.empty() && s[0] == '_') s.erase(0, 1);
  if (s == "full_shard") return 3;
  if (s == "shard_grad_op") return 2;
  if (s == "no_shard") return 0;
  if (s == "hybrid_shard" || s == "hybrid_shard_zero2") return -1;
  return -2;
}

class FsdpReader {
 public:
  std::vector<std::string> problems, no_effect, wrap;

  void options(const std::vector<std::string>& items) {
    for (const std::string& raw : items) {
      const std::string item = lower(raw);
      const FsdpKey* o = find_in(kOptions, item);
      if (!o) {
        auto near = did_you_mean(item, names_of(kOptions));
        problems.push_back(fmt::format("`fsdp`: unknown option '{}' (HF's are {}){}", raw, fmt::join(names_of(kOptions), ", "),
                                       near.empty() ? "" : fmt::format(": did you mean {}?", fmt::join(near, ", "))));
      } else if (o->policy == P::kRefused) {
        problems.push_back(fmt::format("`fsdp: {}` is refused: {}: use {}", raw, o->note,
                                       item == "hybrid_shard" ? "full_shard" : "shard_grad_op"));
      } else if (o->policy == P::kWrap) {
        wrap.push_back("fsdp: " + raw);
      } else if (item == "offload") {
        offload_ = true;
      } else {
        strategy(strategy_stage(item), "fsdp: " + raw);
      }
    }
  }

  void config(const json& cfg, const std::string& label) {
    for (const auto& [given, v] : cfg.items()) {
      const std::string key = given.rfind("fsdp_", 0) == 0 ? given.substr(5) : given;  // HF drops the prefix
      const std::string path = "fsdp_config." + given;
      const FsdpKey* k = find_in(kKeys, key);
      if (!k) {
        auto near = did_you_mean(key, names_of(kKeys));
        problems.push_back(fmt::format("{}: unknown key `{}`{}", label, path,
                                       near.empty() ? std::string(" (not an fsdp_config key HF knows)")
                                                    : fmt::format(": did you mean {}?", fmt::join(near, ", "))));
        continue;
      }
      if (k->policy == P::kRefused && !at_default(v, k->hf_default))
        problems.push_back(fmt::format("`{}: {}` is refused: {}", path, json_text(v), k->note));
      if (k->policy == P::kNoEffect && !at_default(v, k->hf_default))
        no_effect.push_back(fmt::format("{}: {} ({})", path, json_text(v), k->note));
      if (k->policy == P::kWrap && !at_default(v, k->hf_default))
        wrap.push_back(fmt::format("{}: {}", path, json_text(v)));
      if (k->policy == P::kImplemented) implemented(key, path, v);
    }
  }

  // Every source of the stage must agree; full_shard when none says (HF's and accelerate's default).
  int64_t stage() const { return stage_ ? *stage_ : 3; }
  bool offload() const { return offload_; }
  const std::string& stage_source() const { return stage_source_; }

 private:
  void implemented(const std::string& key, const std::string& path, const json& v) {
    if (key == "cpu_offload" || key == "offload_params") {
      const auto b = as_bool(v);
      if (!b) problems.push_back(fmt::format("`{}` must be true or false, got {}", path, json_text(v)));
      offload_ = offload_ || b.value_or(false);
      return;
    }
    int st = strategy_stage(v);
    if (key == "reshard_after_forward" && as_bool(v)) st = *as_bool(v) ? 3 : 2;  // FSDP2's boolean
    if (st == -2)
      problems.push_back(fmt::format("`{}: {}`: expected {}", path, json_text(v),
                                     key == "sharding_strategy" ? "FULL_SHARD, SHARD_GRAD_OP or NO_SHARD"
                                                                : "true, false or a sharding strategy"));
    else if (st == -1)
      problems.push_back(fmt::format("`{}: {}` is refused: {}: use full_shard", path, json_text(v), kHybrid));
    else
      strategy(st, fmt::format("{}: {}", path, json_text(v)));
  }

  void strategy(int st, const std::string& source) {
    if (stage_ && *stage_ != st)
      problems.push_back(fmt::format("`{}` (stage {}) and `{}` (stage {}) disagree: keep one", stage_source_, *stage_,
                                     source, st));
    if (!stage_) {
      stage_ = st;
      stage_source_ = source;
    }
  }

  std::optional<int64_t> stage_;
  std::string stage_source_;
  bool offload_ = false;
};

std::vector<std::string> fsdp_items(const Reader& r) {
  std::vector<std::string> items;
  const YAML::Node& n = r.node("fsdp");
  if (n.IsSequence()) {
    for (const auto& item : n) items.push_back(scalar_text(item));
    return items;
  }
  bool on = false;
  if (YAML::convert<bool>::decode(n, on)) return items;  // `fsdp: true` (transformers >= 5): options in fsdp_config
  std::istringstream words(r.text("fsdp"));  // HF splits the string on whitespace
  for (std::string w; words >> w;) items.push_back(w);
  return items;
}

bool fsdp_on(const Reader& r) {
  if (!r.has("fsdp") || r.text("fsdp").empty()) return false;
  bool on = true;
  if (r.node("fsdp").IsScalar() && YAML::convert<bool>::decode(r.node("fsdp"), on)) return on;
  return true;
}

}  // namespace

std::span<const FsdpKey> fsdp_keys() { return kKeys; }
std::span<const FsdpKey> fsdp_options() { return kOptions; }

std::optional<FsdpSettings> read_fsdp(const Reader& r, const std::string& config_dir,
                                      std::vector<std::string>& warnings, std::vector<std::string>& notes) {
  if (!fsdp_on(r)) {
    if (r.has("fsdp_config") && !r.text("fsdp_config").empty())
      warnings.push_back(fmt::format("{}: `fsdp_config` has no effect without `fsdp` (HF uses it only with fsdp)",
                                     r.where("fsdp_config")));
    return std::nullopt;
  }
  FsdpReader reader;
  const auto items = fsdp_items(r);
  reader.options(items);
  FsdpSettings s;
  if (r.has("fsdp_config") && !r.text("fsdp_config").empty()) {
    JsonInput in = read_json_input(r, "fsdp_config", config_dir);
    reader.config(in.value, in.label);
    s.config = std::move(in.value);
  }
  s.stage = reader.stage();
  if (reader.offload()) {
    s.offload = "params";
    if (s.stage != 3)
      reader.problems.push_back(fmt::format(
          "`offload` with {} is refused: lf-train keeps whole parameters on every GPU below stage 3; offloading them "
          "needs full_shard",
          reader.stage_source()));
  }
  LF_CHECK(reader.problems.empty(), ConfigError, "{}: `fsdp`: {} problem{}:\n  {}", r.where("fsdp"),
           reader.problems.size(), reader.problems.size() == 1 ? "" : "s", fmt::join(reader.problems, "\n  "));
  if (!reader.no_effect.empty())
    warnings.push_back(
        fmt::format("{}: fsdp_config: no effect in lf-train: {}", r.where("fsdp_config"), fmt::join(reader.no_effect, "; ")));
  if (!reader.wrap.empty())
    notes.push_back(fmt::format("{}: {}: {}", r.where("fsdp"), fmt::join(reader.wrap, ", "), kWrapNote));
  s.label = items.empty() ? "fsdp: " + r.text("fsdp") : fmt::format("fsdp: {}", fmt::join(items, " "));
  return s;
}

}  // namespace lf::config
