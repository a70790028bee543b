#include <c10/core/GradMode.h>

#include <cstdlib>
#include <fstream>
#include <mutex>
#include <tuple>

#include "lf/common/remove_tree.h"
#include "lf/common/log.h"
#include "lf/model/loader.h"
#include "lf/model/lora.h"
#include "lf/model/tensor_io.h"
#include "checkpoint_commit.h"
#include "trainer_state.h"

namespace lf::train {
namespace fs = std::filesystem;

void Trainer::State::log_event(json entry, const json& lf_extra, int64_t step) {
  log_history.push_back(entry);
  if (!log_writer) return;
  const double elapsed = seconds_since(start);
  const double remaining = step > first_step ? elapsed / static_cast<double>(step - first_step) *
                                                  static_cast<double>(total_steps - step)
                                            : 0.0;
  nlohmann::ordered_json line;
  line["current_steps"] = step;
  line["total_steps"] = total_steps;
  for (const char* k : {"loss", "eval_loss"})
    if (entry.contains(k)) line[k] = entry[k];
  if (entry.contains("learning_rate")) line["lr"] = entry["learning_rate"];
  if (entry.contains("epoch")) line["epoch"] = entry["epoch"];
  line["percentage"] = total_steps > 0 ? round_to(100.0 * static_cast<double>(step) / total_steps, 2) : 100.0;
  line["elapsed_time"] = format_timedelta(elapsed);
  line["remaining_time"] = format_timedelta(remaining);
  if (tokens_seen > 0) {
    line["throughput"] = round_to(static_cast<double>(tokens_seen - first_tokens) / std::max(elapsed, 1e-9), 2);
    line["total_tokens"] = tokens_seen;
  }
  for (auto& [k, v] : lf_extra.items()) line[k] = v;
  log_writer->write(line);
}

json Trainer::State::trainer_state(int64_t global_step, double epoch) const {
  const int64_t logging = resolve_interval(c.logging_steps, total_steps);
  json j;
  j["best_global_step"] = nullptr;
  j["best_metric"] = nullptr;
  j["best_model_checkpoint"] = nullptr;
  j["epoch"] = epoch;
  j["eval_steps"] = c.eval_steps ? resolve_interval(*c.eval_steps, total_steps) : logging;
  j["global_step"] = global_step;
  j["is_hyper_param_search"] = false;
  j["is_local_process_zero"] = s.rank == 0;
  j["is_world_process_zero"] = s.rank == 0;
  j["log_history"] = log_history;
  j["logging_steps"] = logging;
  j["max_steps"] = total_steps;
  j["num_input_tokens_seen"] = tokens_seen;
  // HF: with max_steps, the epochs those steps reach; else the configured ones, rounded up.
  j["num_train_epochs"] = c.max_steps > 0 ? (total_steps + steps_per_epoch - 1) / std::max<int64_t>(1, steps_per_epoch)
                                          : static_cast<int64_t>(std::ceil(c.num_train_epochs));
  j["save_steps"] = resolve_interval(c.save_steps, total_steps);
  j["stateful_callbacks"] = {{"TrainerControl",
                              {{"args",
                                {{"should_epoch_stop", false},
                                 {"should_evaluate", false},
                                 {"should_log", false},
                                 {"should_save", true},
                                 {"should_training_stop", global_step >= total_steps}}},
                               {"attributes", json::object()}}}};
  j["total_flos"] = flos;
  j["train_batch_size"] = c.per_device_train_batch_size;
  j["trial_name"] = nullptr;
  j["trial_params"] = nullptr;
  return j;
}

void Trainer::State::save_model(const fs::path& dir) {
  fs::create_directories(dir);
  if (s.lora) {
    model::save_lora_adapter(m, *s.lora, dir, c.model_name_or_path);
  } else {
    model::SaveOptions o;
    if (!s.model_dir.empty() && fs::is_directory(s.model_dir)) o.copy_files_from = s.model_dir;
    model::save_causal_lm(m, dir, o);
  }
  // Tokenizer side files next to the weights (LLaMA-Factory saves the tokenizer too).
  if (!s.model_dir.empty() && fs::is_directory(s.model_dir)) {
    std::vector<std::string> files;
    for (const char* const* f = model::kModelSideFiles; *f; ++f) files.emplace_back(*f);
    files.insert(files.end(), {"encoder.json", "vocab.bpe"});
    for (const auto& f : files)
      if (fs::exists(s.model_dir / f) && !fs::exists(dir / f)) fs::copy_file(s.model_dir / f, dir / f);
  }
}

TensorList Trainer::State::rng_states_to_save() {
  TensorList mine;
  auto capture = [&](const char* key, c10::Device d) {
    auto gen = at::globalContext().defaultGenerator(d);
    std::lock_guard<std::mutex> lock(gen.mutex());
    mine.emplace_back(key, gen.get_state());
  };
  capture("cpu", c10::Device(c10::DeviceType::CPU));
  if (device.is_cuda()) capture("cuda", device);
  if (s.world == 1) return mine;
  // Each rank's streams differ (seeded from (seed, rank), then drawn by batches of their own
  // shapes): one byte row per rank, split back by the sizes, equal on every rank.
  std::vector<at::Tensor> parts;
  for (const auto& [key, t] : mine) parts.push_back(t.contiguous().view(-1));
  const auto every = s.all_gather_bytes(at::cat(parts));
  TensorList out = mine;  // rank 0's under the plain names: what a 1-rank resume restores
  for (int64_t r = 0; r < s.world; ++r) {
    int64_t offset = 0;
    for (const auto& [key, t] : mine) {
      out.emplace_back(fmt::format("rank{}.{}", r, key), every[r].narrow(0, offset, t.numel()).clone());
      offset += t.numel();
    }
  }
  return out;
}

void Trainer::State::save_checkpoint(int64_t global_step, double epoch, const json& loop, const TensorList& rng) {
  const fs::path out(c.output_dir);
  const fs::path final_dir = out / fmt::format("checkpoint-{}", global_step);
  const fs::path tmp = out / fmt::format(".checkpoint-{}.tmp", global_step);
  lf::remove_tree(tmp);
  save_model(tmp);
  std::vector<std::pair<std::string, at::Tensor>> state;
  if (!opt->exp_avg().empty())
    for (size_t i = 0; i < trainable.size(); ++i) {
      state.emplace_back(trainable[i].first + ".exp_avg", opt->exp_avg()[i]);
      state.emplace_back(trainable[i].first + ".exp_avg_sq", opt->exp_avg_sq()[i]);
    }
  if (!state.empty()) model::save_tensor_file(tmp / "optimizer.safetensors", state);
  write_json_file(tmp / "trainer_state.json", trainer_state(global_step, epoch), 2);
  json lf_state = {{"global_step", global_step},     {"scheduler_step", sched_step},
                   {"optimizer_steps", opt->steps()}, {"loss_scale", scaler.scale()},
                   {"growth_tracker", scaler.growth_tracker()}, {"epoch", epoch},
                   {"seed", c.seed},                  {"tokens_seen", tokens_seen},
                   {"total_flos", flos},              {"loop", loop},
                   // The job that wrote it: an agent restart resumes only its own job's checkpoints.
                   {"run_id", std::getenv("TORCHELASTIC_RUN_ID") ? std::getenv("TORCHELASTIC_RUN_ID") : ""}};
  // DESIGN "RNG": the generators' states (dropout masks continue as if uninterrupted).
  model::save_tensor_file(tmp / "rng_state.safetensors", rng);
  write_json_file(tmp / "lf_trainer_state.json", lf_state, 2);
  seal_checkpoint_folder(tmp);  // durable, with a manifest of checksums, before it is named
  commit_checkpoint_folder(tmp, final_dir);
  if (c.save_total_limit && *c.save_total_limit > 0) {
    // The oldest written go first (HF rotates by write time), never the one just written: a
    // leftover of an older, longer run (checkpoint-900 beside a new checkpoint-100) must not
    // outlive every new checkpoint.
    std::vector<std::tuple<fs::file_time_type, int64_t, fs::path>> others;
    for (const auto& e : fs::directory_iterator(out)) {
      const auto name = e.path().filename().string();
      if (!e.is_directory() || name.rfind("checkpoint-", 0) != 0 || e.path() == final_dir) continue;
      try {
        others.emplace_back(fs::last_write_time(e.path()), std::stoll(name.substr(11)), e.path());
      } catch (const std::exception&) {
      }
    }
    std::sort(others.begin(), others.end());
    for (size_t i = 0; i + *c.save_total_limit <= others.size(); ++i) lf::remove_tree(std::get<2>(others[i]));
  }
}

json Trainer::State::load_checkpoint(const fs::path& dir) {
  const auto state_file = dir / "lf_trainer_state.json";
  LF_CHECK(fs::exists(state_file), ConfigError,
           "resume_from_checkpoint: {} is not a checkpoint written by lf-train (no lf_trainer_state.json)",
           dir.string());
  // Rank 0 reads every byte against the checksums (if it refuses, the job stops); the other
  // ranks check the sizes only, not reading a shared checkpoint N more times.
  const auto damage = checkpoint_damage(dir, s.rank == 0 ? CheckDepth::kChecksums : CheckDepth::kSizes);
  if (damage == kNoManifest)
    spdlog::warn("{} has no {} (written by an older lf-train): its files are not verified", dir.string(),
                 kManifestFile);
  else
    LF_CHECK(damage.empty(), ConfigError,
             "resume_from_checkpoint: {} is damaged: {} (a save that did not finish, or a disk error); resume from "
             "an earlier checkpoint-N", dir.string(), damage);
  std::ifstream in(state_file);
  const json st = json::parse(in, nullptr, /*allow_exceptions=*/false);
  LF_CHECK(st.is_object(), ConfigError, "resume_from_checkpoint: {} is not valid JSON", state_file.string());
  LF_CHECK(st.value("seed", c.seed) == c.seed, ConfigError,
           "resume_from_checkpoint: {} was written with seed {}, this run has seed {}: the example order would differ",
           dir.string(), st.value("seed", c.seed), c.seed);
  c10::NoGradGuard no_grad;
  // Weights: the adapter, or the full model.
  if (s.lora) {
    const auto saved = model::load_tensor_file(dir / "adapter_model.safetensors");
    for (auto& p : model::lora_parameters(m)) {
      auto it = saved.find(p.name);
      LF_CHECK(it != saved.end(), ConfigError, "{}: no tensor {}", (dir / "adapter_model.safetensors").string(), p.name);
      p.tensor->copy_(it->second);
    }
  } else {
    model::load_weights(m, model::SafetensorsCheckpoint(dir));
  }
  // Optimizer moments, by parameter name.
  if (fs::exists(dir / "optimizer.safetensors")) {
    const auto saved = model::load_tensor_file(dir / "optimizer.safetensors");
    std::vector<at::Tensor> m1, m2;
    for (const auto& [name, t] : trainable) {
      auto a = saved.find(name + ".exp_avg"), b = saved.find(name + ".exp_avg_sq");
      LF_CHECK(a != saved.end() && b != saved.end(), ConfigError, "{}: no optimizer state for {}",
               (dir / "optimizer.safetensors").string(), name);
      m1.push_back(a->second);
      m2.push_back(b->second);
    }
    opt->load_state(std::move(m1), std::move(m2), st.at("optimizer_steps").get<int64_t>());
  }
  sched_step = st.at("scheduler_step").get<int64_t>();
  scaler.set_state(st.at("loss_scale").get<double>(), st.at("growth_tracker").get<int64_t>());
  tokens_seen = st.value("tokens_seen", int64_t{0});
  flos = st.value("total_flos", 0.0);
  if (fs::exists(dir / "trainer_state.json")) {
    std::ifstream ts(dir / "trainer_state.json");
    log_history = json::parse(ts).value("log_history", json::array());
  }
  if (fs::exists(dir / "rng_state.safetensors")) {
    const auto rng = model::load_tensor_file(dir / "rng_state.safetensors");
    auto restore = [&](const char* key, c10::Device d) {
      // This rank's own state; else rank 0's (a 1-rank checkpoint, or more ranks than it had).
      auto it = rng.find(fmt::format("rank{}.{}", s.rank, key));
      if (it == rng.end()) it = rng.find(key);
      if (it == rng.end()) return;
      auto gen = at::globalContext().defaultGenerator(d);
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(it->second);
    };
    restore("cpu", c10::Device(c10::DeviceType::CPU));
    if (device.is_cuda()) restore("cuda", device);
  }
  return st;
}

}  // namespace lf::train
