// LLaMA-Factory's predict run (lf/train/predict_run.h): data, model, batched generation on every rank, rank 0
// gathers through the job's store and writes (predict_outputs.h).
#include "lf/train/predict_run.h"

#include <ATen/ATen.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "lf/comm/process_group.h"
#include "lf/common/env_knobs.h"
#include "lf/common/error.h"
#include "lf/common/progress_deadline.h"
#include "lf/data/sft_dataset.h"
#include "lf/data/unsupervised.h"
#include "lf/model/initial_weights.h"
#include "lf/model/loader.h"
#include "lf/model/lora.h"
#include "lf/rendezvous/store_client.h"
#include "lf/train/generation.h"
#include "predict_outputs.h"
#include "worker_device.h"

namespace lf::train {
namespace fs = std::filesystem;
namespace {

fs::path model_dir(const config::JobPlan& c) {
  const fs::path src(c.model.model_name_or_path);
  return fs::is_directory(src) ? src : src.parent_path();
}

nlohmann::json read_json(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return nlohmann::json::object();
  auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j : nlohmann::json::object();
}

// LLaMA-Factory's workflow: eos_token_id = [tokenizer.eos_token_id] + the tokenizer's extra (additional)
// special tokens, duplicates dropped in order; the template's eos after its replace_eos.
std::vector<int32_t> stop_ids(const ChatTemplate& tmpl, const Tokenizer& tok, const fs::path& dir) {
  std::vector<int32_t> ids = {tmpl.eos_id()};
  const auto cfg = read_json(dir / "tokenizer_config.json");
  for (const char* key : {"extra_special_tokens", "additional_special_tokens"}) {
    if (!cfg.contains(key)) continue;
    const auto& list = cfg[key];
    for (const auto& v : list) {  // a list of tokens, or (transformers 5) a name -> token object
      const std::string text = v.is_string() ? v.get<std::string>() : v.value("content", std::string());
      if (const auto id = tok.token_to_id(text); id && std::find(ids.begin(), ids.end(), *id) == ids.end())
        ids.push_back(*id);
    }
    break;
  }
  return ids;
}

// The model the workflow predicts with: the compute dtype, adapters merged in turn (not trainable).
std::unique_ptr<model::CausalLM> load_predict_model(const config::JobPlan& c, const Tokenizer& tok) {
  model::LoadOptions lo;
  lo.device = pick_device();
  lo.seed = static_cast<uint64_t>(c.seed);
  // init_weights auto | pretrained | random against what the folder holds, as training chooses.
  const auto initial = model::choose_initial_weights(c.model.model_name_or_path, c.model.init_weights, c.seed);
  if (!initial.note.empty() && !knob_bool("LF_CONFIG_CHECKED").value_or(false)) spdlog::warn("{}", initial.note);
  lo.random_init = initial.random;
  const auto dtype = c.precision.bf16 ? at::kBFloat16 : c.precision.fp16 ? at::kHalf : at::kFloat;
  lo.param_dtype = dtype;
  auto model = model::load_causal_lm(c.model.model_name_or_path, lo);
  model->set_compute_dtype(dtype);
  LF_CHECK(tok.vocab_size() <= model->config().vocab_size, ConfigError,
           "the tokenizer at {} has {} tokens but the model's vocab_size is {}: use the tokenizer of this model",
           tok.source().string(), tok.vocab_size(), model->config().vocab_size);
  for (const auto& a : c.adapter.adapter_name_or_path) {
    model::merge_lora_adapter(*model, a);
    spdlog::info("adapter {} merged", a);
  }
  spdlog::info("predict: {} ({} layers) on {}, {}", c.model.model_name_or_path, model->num_layers(), lo.device.str(),
               c10::toString(dtype));
  return model;
}

GenerationConfig generation_config(const config::JobPlan& c, const ChatTemplate& tmpl, const Tokenizer& tok) {
  GenerationConfig g;
  g.do_sample = c.predict.do_sample;
  g.temperature = c.predict.temperature;
  g.top_p = c.predict.top_p;
  g.top_k = c.predict.top_k;
  g.max_new_tokens = c.predict.max_new_tokens;
  g.repetition_penalty = c.predict.repetition_penalty;
  g.eos_ids = stop_ids(tmpl, tok, model_dir(c));
  g.pad_id = tmpl.pad_id();
  return g;
}

// A rank's batches as text: "b n" then per row its generated ids ("len id id ...").
std::string serialize(const std::vector<std::pair<int64_t, std::vector<std::vector<int32_t>>>>& mine) {
  std::ostringstream s;
  for (const auto& [b, rows] : mine) {
    s << b << ' ' << rows.size();
    for (const auto& r : rows) {
      s << ' ' << r.size();
      for (auto id : r) s << ' ' << id;
    }
    s << '\n';
  }
  return s.str();
}

void deserialize(const std::string& text, std::vector<PredictBatch>& batches) {
  std::istringstream s(text);
  int64_t b = 0;
  size_t n = 0;
  while (s >> b >> n) {
    LF_CHECK(b >= 0 && static_cast<size_t>(b) < batches.size() && n == batches[static_cast<size_t>(b)].prompts.size(),
             BackendError, "predict: a rank sent batch {} of {} rows, which is not one of this run's", b, n);
    auto& out = batches[static_cast<size_t>(b)].generated;
    out.resize(n);
    for (auto& r : out) {
      size_t len = 0;
      s >> len;
      r.resize(len);
      for (auto& id : r) s >> id;
    }
  }
}

// The batches as LLaMA-Factory's eval dataloader makes them: per_device_eval_batch_size rows in order.
std::vector<PredictBatch> make_batches(const std::vector<EncodedExample>& rows, int64_t batch_size) {
  std::vector<PredictBatch> batches;
  for (size_t i = 0; i < rows.size(); i += static_cast<size_t>(batch_size)) {
    PredictBatch b;
    for (size_t j = i; j < std::min(rows.size(), i + static_cast<size_t>(batch_size)); ++j) {
      b.prompts.push_back(rows[j].input_ids);
      b.labels.push_back(rows[j].labels);
    }
    batches.push_back(std::move(b));
  }
  return batches;
}

int64_t generation_max_length(const fs::path& dir) {
  for (const char* f : {"generation_config.json", "config.json"}) {
    const auto j = read_json(dir / f);
    if (j.contains("max_length") && j["max_length"].is_number_integer()) return j["max_length"].get<int64_t>();
  }
  return 20;  // GenerationConfig's default
}

}  // namespace

void predict_from_config(const config::LoadedConfig& loaded) {
  const config::JobPlan& c = loaded.plan;
  const auto world = comm::WorldInfo::from_env();
  progress_reporter().tokenizing();
  const auto tokenizer = load_tokenizer_for(c.data);
  const ChatTemplate tmpl = resolve_template(c.data, tokenizer);
  const auto rows = encode_unsupervised(load_examples(c.data, c.data.eval_dataset), tmpl, c.data.cutoff_len);
  LF_CHECK(!rows.empty(), ConfigError, "eval_dataset {} has no example to predict for after preprocessing",
           fmt::join(c.data.eval_dataset, ","));
  auto batches = make_batches(rows, c.eval.per_device_eval_batch_size);
  spdlog::info("predict: {} examples in {} batches of {}, {} rank(s)", rows.size(), batches.size(),
               c.eval.per_device_eval_batch_size, world.world_size);
  progress_reporter().loading();
  const auto model = load_predict_model(c, tokenizer);
  const auto gen = generation_config(c, tmpl, tokenizer);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::pair<int64_t, std::vector<std::vector<int32_t>>>> mine;
  for (size_t b = static_cast<size_t>(world.rank); b < batches.size(); b += static_cast<size_t>(world.world_size)) {
    progress_reporter().evaluating(static_cast<int64_t>(b));
    // Sampling: one seed a batch, so the rank that generates it does not change what is drawn.
    at::manual_seed(static_cast<uint64_t>(c.seed) * 1000003ULL + b);
    auto out = generate(*model, batches[b].prompts, gen);
    batches[b].generated = out;
    mine.emplace_back(static_cast<int64_t>(b), std::move(out));
  }
  if (world.world_size > 1) {
    auto store = rdzv::StoreClient::from_env();
    const auto key = [&](int r) { return fmt::format("predict/g{}/rank{}", world.generation, r); };
    if (world.rank != 0) {
      store.set(key(world.rank), serialize(mine));
      progress_reporter().done();
      return;
    }
    std::vector<std::string> keys;
    for (int r = 1; r < world.world_size; ++r) keys.push_back(key(r));
    store.wait(keys, std::chrono::hours(2));  // the other ranks generate as long as this one
    for (const auto& k : keys) deserialize(store.get(k).value_or(""), batches);
  }
  const double runtime = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  PredictWrite w;
  w.output_dir = c.output.output_dir;
  w.pad_id = gen.pad_id;
  w.skip_special_tokens = c.predict.skip_special_tokens;
  w.generation_max_length = generation_max_length(model_dir(c));
  w.runtime_s = runtime;
  w.total_batch_size = c.eval.per_device_eval_batch_size * world.world_size;
  write_predictions(batches, tokenizer, w);
  progress_reporter().done();
}

}  // namespace lf::train
