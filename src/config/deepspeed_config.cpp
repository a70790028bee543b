#include "deepspeed_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "deepspeed_keys.h"
#include "did_you_mean.h"
#include "json_input.h"

namespace lf::config {

namespace {

using json = nlohmann::json;

std::string lower(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

bool is_auto(const json& v) { return v.is_string() && v.get<std::string>() == "auto"; }

bool type_ok(const json& v, DsType t) {
  switch (t) {
    case DsType::kBool: return v.is_boolean();
    case DsType::kNumber: return v.is_number();
    case DsType::kInt:
      return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
    case DsType::kString: return v.is_string();
    case DsType::kObject: return v.is_object();
    case DsType::kList: return v.is_array();
    case DsType::kAny: return true;
  }
  return false;
}

const char* type_name(DsType t) {
  switch (t) {
    case DsType::kBool: return "true or false";
    case DsType::kNumber: return "a number";
    case DsType::kInt: return "an integer";
    case DsType::kString: return "a string";
    case DsType::kObject: return "an object";
    case DsType::kList: return "a list";
    case DsType::kAny: return "a value";
  }
  return "?";
}

bool matches_any(const json& v, std::string_view alternatives) {
  while (true) {
    const auto bar = alternatives.find('|');
    if (json::parse(std::string(alternatives.substr(0, bar))) == v) return true;
    if (bar == std::string_view::npos) return false;
    alternatives.remove_prefix(bar + 1);
  }
}

json deepspeed_default(const DsKey& k) {
  return k.deepspeed_default.empty() ? json(nullptr) : json::parse(std::string(k.deepspeed_default));
}

// An opaque section asks for something when its "enabled" is true, or (without one) when it is not empty.
bool active(const json& v) {
  if (v.is_object() && v.contains("enabled")) return v["enabled"] == true || v["enabled"] == "true";
  return !(v.is_null() || (v.is_object() && v.empty()));
}

// The last segments of the declared keys under `prefix`, for did-you-mean.
std::vector<std::string> declared_children(const std::string& prefix) {
  std::vector<std::string> out;
  for (const DsKey& k : deepspeed_keys()) {
    std::string_view p = k.path;
    if (!prefix.empty()) {
      if (p.substr(0, prefix.size() + 1) != prefix + ".") continue;
      p.remove_prefix(prefix.size() + 1);
    }
    if (p.find('.') == std::string_view::npos) out.emplace_back(p);
  }
  return out;
}

// Hidden size from the model's config.json (HF reads the same for its "auto" bucket sizes).
std::optional<int64_t> hidden_size(const std::string& model_dir, std::string& why) {
  const std::filesystem::path p = std::filesystem::path(model_dir) / "config.json";
  std::ifstream in(p);
  if (!in) {
    why = fmt::format("cannot read {}", p.string());
    return std::nullopt;
  }
  json cfg = json::parse(in, nullptr, false);
  for (const json* c : {&cfg, cfg.is_object() && cfg.contains("text_config") ? &cfg["text_config"] : nullptr}) {
    if (!c || !c->is_object()) continue;
    if (c->contains("hidden_size") && (*c)["hidden_size"].is_number_integer()) return (*c)["hidden_size"].get<int64_t>();
    if (c->contains("hidden_sizes") && (*c)["hidden_sizes"].is_array() && !(*c)["hidden_sizes"].empty()) {
      int64_t largest = 0;  // HF takes the largest
      for (const auto& h : (*c)["hidden_sizes"]) largest = std::max(largest, h.get<int64_t>());
      return largest;
    }
  }
  why = fmt::format("{} has no hidden_size", p.string());
  return std::nullopt;
}

// Checks one file against the table and reads it into DeepSpeedSettings; collects every problem.
class DeepSpeedReader {
 public:
  DeepSpeedReader(const Reader& r, const JobPlan& c, std::string file) : r_(r), c_(c), file_(std::move(file)) {}

  DeepSpeedSettings read(const json& root) {
    root_ = &root;
    walk(root, "");
    if (type_errors_) return std::move(s_);  // what follows reads values of the declared types
    check_loss_scaler();
    match_yaml();
    read_zero();
    return std::move(s_);
  }

  std::vector<std::string> problems;
  std::vector<std::string> no_effect;

 private:
  const json* get(const std::string& path) const {
    const json* v = root_;
    size_t start = 0;
    while (start <= path.size()) {
      const size_t dot = path.find('.', start);
      const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      if (!v->is_object() || !v->contains(part)) return nullptr;
      v = &(*v)[part];
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    return v->is_null() ? nullptr : v;
  }

  void problem(std::string text) { problems.push_back(fmt::format("{}: {}", file_, text)); }

  void walk(const json& obj, const std::string& prefix) {
    for (const auto& [k, v] : obj.items()) {
      const std::string path = prefix.empty() ? k : prefix + "." + k;
      const DsKey* key = find_deepspeed_key(path);
      if (!key) {
        auto near = did_you_mean(k, declared_children(prefix));
        problem(fmt::format("unknown key `{}`{}", path,
                            near.empty() ? std::string(" (not a DeepSpeed key lf-train knows)")
                                         : fmt::format(": did you mean {}?", fmt::join(near, ", "))));
        continue;
      }
      if (key->policy == DsPolicy::kIgnored || v.is_null()) continue;
      if (is_auto(v)) {
        if (!key->auto_ok) {
          problem(fmt::format("`{}: \"auto\"`: HF fills \"auto\" only for batch sizes, clipping, precision, the "
                              "optimizer's parameters and ZeRO's bucket sizes: give {}",
                              path, type_name(key->type)));
          type_errors_ = true;
        }
        continue;
      }
      if (!type_ok(v, key->type)) {
        problem(fmt::format("`{}` must be {}, got {}", path, type_name(key->type), json_text(v)));
        type_errors_ = true;
        continue;
      }
      if (key->opaque) {
        judge_whole(*key, v);
      } else if (key->type == DsType::kObject) {
        walk(v, path);
      } else if (key->policy == DsPolicy::kNoEffect && v != deepspeed_default(*key)) {
        no_effect.push_back(fmt::format("{}: {} ({})", path, json_text(v), key->note));
      } else if (key->policy == DsPolicy::kRefused && !key->fp16_only &&
                 !matches_any(v, key->accepted.empty() ? (key->deepspeed_default.empty() ? "null"
                                                                                       : key->deepspeed_default)
                                                       : key->accepted)) {
        problem(fmt::format("`{}: {}` is refused: {}", path, json_text(v), key->note));
      }
    }
  }

  void judge_whole(const DsKey& key, const json& v) {
    if (!active(v)) return;
    if (key.policy == DsPolicy::kRefused) problem(fmt::format("`{}` is refused: {}", key.path, key.note));
    if (key.policy == DsPolicy::kNoEffect) no_effect.push_back(fmt::format("{} ({})", key.path, key.note));
  }

  // DeepSpeed's loss scaler runs whenever fp16 does, with its defaults for what the file leaves out.
  void check_loss_scaler() {
    if (!c_.precision.fp16) return;
    for (const DsKey& k : deepspeed_keys()) {
      if (!k.fp16_only) continue;
      const json* v = get(std::string(k.path));
      const json effective = v ? *v : deepspeed_default(k);
      if (!matches_any(effective, k.accepted))
        problem(fmt::format("`{}: {}`{} under fp16 is refused (lf-train honours {}): {}", k.path,
                            json_text(effective), v ? "" : " (DeepSpeed's default)", k.accepted, k.note));
    }
  }

  std::string yaml_where(const std::string& key) const { return r_.has(key) ? r_.where(key) : "its default"; }

  // HF's fill_match: "auto" (or absent) takes the YAML's value, an explicit one must equal it.
  void match(const std::string& path, const json& yaml_value, const std::string& yaml_key) {
    const json* v = get(path);
    if (!v || is_auto(*v) || *v == yaml_value) return;
    problem(fmt::format("`{}: {}` contradicts `{}: {}` ({}): set it to \"auto\" or make them equal", path,
                        json_text(*v), yaml_key, json_text(yaml_value), yaml_where(yaml_key)));
  }

  void match_yaml() {
    match("train_micro_batch_size_per_gpu", c_.schedule.per_device_train_batch_size, "per_device_train_batch_size");
    match("gradient_accumulation_steps", c_.schedule.gradient_accumulation_steps, "gradient_accumulation_steps");
    match("gradient_clipping", c_.optim.max_grad_norm, "max_grad_norm");
    match("fp16.enabled", c_.precision.fp16, "fp16");
    match("bf16.enabled", c_.precision.bf16, "bf16");
    match("bfloat16.enabled", c_.precision.bf16, "bf16");
    match("optimizer.params.lr", c_.optim.learning_rate, "learning_rate");
    match("optimizer.params.betas", json::array({c_.optim.adam_beta1, c_.optim.adam_beta2}), "adam_beta1/adam_beta2");
    match("optimizer.params.eps", c_.optim.adam_epsilon, "adam_epsilon");
    match("optimizer.params.weight_decay", c_.optim.weight_decay, "weight_decay");
    if (const json* t = get("communication_data_type"); t && !is_auto(*t) && lower(t->get<std::string>()) != c_.parallel.ddp_reduce_dtype)
      problem(fmt::format("`communication_data_type: {}` contradicts `ddp_reduce_dtype: {}` ({}): lf-train reduces "
                          "gradients in fp32 or bf16; set ddp_reduce_dtype to match, or remove the key",
                          json_text(*t), c_.parallel.ddp_reduce_dtype, yaml_where("ddp_reduce_dtype")));
    if (const json* t = get("optimizer.type"); t && lower(t->get<std::string>()) != "adam" &&
                                               lower(t->get<std::string>()) != "adamw")
      problem(fmt::format("`optimizer.type: {}` is refused: lf-train trains with its own AdamW (HF's defaults); "
                          "use Adam or AdamW, or remove the optimizer section",
                          json_text(*t)));
    if (const json* t = get("train_batch_size"); t && !is_auto(*t)) {
      const int64_t tbs = t->get<int64_t>();
      const int64_t per_rank = c_.schedule.per_device_train_batch_size * c_.schedule.gradient_accumulation_steps;
      if (tbs <= 0 || tbs % per_rank != 0)
        problem(fmt::format("`train_batch_size: {}` is not a multiple of per_device_train_batch_size x "
                            "gradient_accumulation_steps = {} x {} = {} (it must be that times the world size): set "
                            "it to \"auto\"",
                            tbs, c_.schedule.per_device_train_batch_size, c_.schedule.gradient_accumulation_steps, per_rank));
      else
        s_.train_batch_size = tbs;
    }
  }

  // A bucket size in elements ("auto": `auto_factor` x hidden_size^2, as HF fills it) as MiB of
  // the dtype DeepSpeed holds it in.
  double bucket_mb(const std::string& path, double fallback, double auto_factor) {
    double elements = fallback;
    if (const json* v = get(path)) {
      if (is_auto(*v)) {
        if (!hidden_tried_) hidden_ = hidden_size(c_.model.model_name_or_path, why_hidden_);
        hidden_tried_ = true;
        if (!hidden_) {
          problem(fmt::format("`{}: \"auto\"` is HF's {}hidden_size^2 and needs the model's hidden_size ({}): give "
                              "a number of elements",
                              path, auto_factor == 1 ? "" : fmt::format("{} x ", auto_factor), why_hidden_));
          return 0;
        }
        elements = std::floor(auto_factor * static_cast<double>(*hidden_) * static_cast<double>(*hidden_));
      } else {
        elements = v->get<double>();
      }
    }
    const double bytes = c_.precision.bf16 || c_.precision.fp16 ? 2 : 4;
    return elements * bytes / (1024.0 * 1024.0);
  }

  // "cpu" or "none" from a device key (or its deprecated boolean), "" when it asks for something refused.
  std::string device(const std::string& section, const std::string& deprecated) {
    std::string dev = "none";
    if (const json* d = get(deprecated); d && *d == true) dev = "cpu";
    if (const json* d = get("zero_optimization." + section + ".device")) dev = lower(d->get<std::string>());
    if (dev == "none" || dev == "cpu") return dev;
    problem(fmt::format("`zero_optimization.{}.device: \"{}\"` is refused: {}", section, dev,
                        dev == "nvme" ? "NVMe offload is not supported (cpu and none are)"
                                      : "expected cpu or none"));
    return "";
  }

  void read_offload() {
    const std::string opt = device("offload_optimizer", "zero_optimization.cpu_offload");
    const std::string param = device("offload_param", "zero_optimization.cpu_offload_param");
    if (opt.empty() || param.empty()) return;
    if (param == "cpu" && opt != "cpu")
      problem("`zero_optimization.offload_param` without offload_optimizer is refused: lf-train offloads parameters "
              "only together with the optimizer: add \"offload_optimizer\": {\"device\": \"cpu\"}");
    if (param == "cpu" && s_.stage != 3)
      problem(fmt::format("`zero_optimization.offload_param` needs stage 3 (got stage {}): parameters are sharded, "
                          "and so offloadable, only at stage 3",
                          s_.stage));
    if (opt == "cpu" && s_.stage == 0)
      problem("`zero_optimization.offload_optimizer` needs ZeRO stage 1, 2 or 3 (got stage 0)");
    s_.offload = param == "cpu" ? "params" : opt == "cpu" ? "optimizer" : "none";
    if (const json* ratio = get("zero_optimization.offload_optimizer.ratio")) {
      const double v = ratio->is_number() ? ratio->get<double>() : -1;
      if (!(v > 0 && v <= 1))
        problem(fmt::format("`zero_optimization.offload_optimizer.ratio: {}`: expected the share of the optimizer "
                            "offloaded, a number in (0, 1]",
                            json_text(*ratio)));
      else if (v < 1 && s_.offload == "none")
        problem(fmt::format("`zero_optimization.offload_optimizer.ratio: {}` without `offload_optimizer.device: "
                            "\"cpu\"` offloads nothing: set the device, or drop the ratio",
                            json_text(*ratio)));
      else
        s_.offload_ratio = v;
    }
    if (s_.offload == "none") return;
    bool pin = false;
    for (const char* p : {"zero_optimization.offload_optimizer.pin_memory", "zero_optimization.offload_param.pin_memory",
                          "zero_optimization.cpu_offload_use_pin_memory"})
      if (const json* v = get(p)) pin = pin || *v == true;
    s_.pin_memory = pin;
  }

  void read_zero() {
    if (const json* st = get("zero_optimization.stage")) {
      s_.stage = st->get<int64_t>();
      if (s_.stage < 0 || s_.stage > 3)
        problem(fmt::format("`zero_optimization.stage: {}` is refused: DeepSpeed's ZeRO stages are 0 (off), 1, 2 "
                            "and 3",
                            json_text(*st)));
    }
    const json* overlap = get("zero_optimization.overlap_comm");
    s_.overlap_comm = overlap ? overlap->get<bool>() : s_.stage == 3;  // DeepSpeed's dynamic default
    s_.reduce_bucket_mb = bucket_mb("zero_optimization.reduce_bucket_size", 5e8, 1.0);
    s_.allgather_bucket_mb = bucket_mb("zero_optimization.allgather_bucket_size", 5e8, 1.0);
    const json* a = get("zero_optimization.stage3_prefetch_bucket_size");
    const json* b = get("zero_optimization.prefetch_bucket_size");
    if (a && b && *a != *b)
      problem(fmt::format("`zero_optimization.stage3_prefetch_bucket_size: {}` and its other name "
                          "`prefetch_bucket_size: {}` disagree: keep one",
                          json_text(*a), json_text(*b)));
    s_.prefetch_bucket_mb = bucket_mb(b && !a ? "zero_optimization.prefetch_bucket_size"
                                              : "zero_optimization.stage3_prefetch_bucket_size",
                                      5e7, 0.9);
    for (const char* flag : {"zero_optimization.contiguous_gradients", "zero_optimization.reduce_scatter"})
      if (const json* v = get(flag); v && *v == false)
        no_effect.push_back(fmt::format("{}: false ({})", flag, find_deepspeed_key(flag)->note));
    read_offload();
  }

  const Reader& r_;
  const JobPlan& c_;
  std::string file_;
  const json* root_ = nullptr;
  DeepSpeedSettings s_;
  bool type_errors_ = false;
  bool hidden_tried_ = false;
  std::optional<int64_t> hidden_;
  std::string why_hidden_;
};

}  // namespace

std::optional<DeepSpeedSettings> read_deepspeed(const Reader& r, const JobPlan& c, const std::string& config_dir,
                                                std::vector<std::string>& warnings) {
  if (!r.has("deepspeed") || r.text("deepspeed").empty()) return std::nullopt;
  JsonInput in = read_json_input(r, "deepspeed", config_dir);
  DeepSpeedReader reader(r, c, in.label);
  DeepSpeedSettings s = reader.read(in.value);
  LF_CHECK(reader.problems.empty(), ConfigError, "{}: `deepspeed: {}`: {} problem{} in the DeepSpeed config:\n  {}",
           r.where("deepspeed"), in.label, reader.problems.size(), reader.problems.size() == 1 ? "" : "s",
           fmt::join(reader.problems, "\n  "));
  if (!reader.no_effect.empty())
    warnings.push_back(fmt::format("{}: `deepspeed: {}`: no effect in lf-train: {}", r.where("deepspeed"), in.label,
                                   fmt::join(reader.no_effect, "; ")));
  s.label = "deepspeed: " + in.label;
  s.content = std::move(in.value);
  return s;
}

}  // namespace lf::config
