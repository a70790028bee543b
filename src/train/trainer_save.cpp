// Model outputs and checkpoints: what HF / LLaMA-Factory users find in output_dir, and the
// checkpoint-N folders a run resumes from, written through the per-rank commit
// (ckpt/rank_commit.h) so that a checkpoint exists only once every rank's files are durable.
#include <c10/core/GradMode.h>

#include <cstdlib>
#include <fstream>
#include <mutex>
#include <tuple>

#include "lf/ckpt/format.h"
#include "lf/ckpt/rank_commit.h"
#include "lf/common/log.h"
#include "lf/common/remove_tree.h"
#include "lf/model/loader.h"
#include "lf/model/lora.h"
#include "lf/common/disk_space.h"
#include "lf/model/safetensors.h"
#include "lf/model/tensor_io.h"
#include "lf/model/value_head.h"
#include "output_metadata.h"
#include "trainer_state.h"

namespace lf::train {
namespace fs = std::filesystem;

namespace {

// save_total_limit: the oldest written go first (HF rotates by write time), never the one just
// written: a leftover of an older, longer run (checkpoint-900 beside a new checkpoint-100)
// must not outlive every new checkpoint.
void rotate_checkpoints(const fs::path& out, const fs::path& just_written, int64_t limit) {
  std::vector<std::tuple<fs::file_time_type, int64_t, fs::path>> others;
  for (const auto& e : fs::directory_iterator(out)) {
    const auto name = e.path().filename().string();
    if (!e.is_directory() || name.rfind("checkpoint-", 0) != 0 || e.path() == just_written) continue;
    try {
      others.emplace_back(fs::last_write_time(e.path()), std::stoll(name.substr(11)), e.path());
    } catch (const std::exception&) {
    }
  }
  std::sort(others.begin(), others.end());
  for (size_t i = 0; i + static_cast<size_t>(limit) <= others.size(); ++i) lf::remove_tree(std::get<2>(others[i]));
}

// A save that cannot fit fails before it writes (a full disk mid-save leaves a torn temporary
// folder and a run that fails again at the same step): the bytes a checkpoint of this run takes,
// the trainable weights in fp32 and two fp32 moments each, every rank's share together.
// The launcher's preflight applies the same rule (lf/common/disk_space.h).
void check_room_for_checkpoint(const fs::path& out, int64_t trainable, int64_t step) {
  const auto need = save_bytes_needed(static_cast<uint64_t>(trainable), true);
  std::error_code ec;
  const auto space = fs::space(out, ec);
  if (ec) return;  // a filesystem that does not say: the write itself reports a full disk
  LF_CHECK(space.available >= need, ConfigError,
           "checkpoint-{} needs about {} in {} and only {} are free: free some space, move output_dir, "
           "lower save_total_limit, or save less often (save_steps)",
           step, size_text(static_cast<double>(need)), out.string(), size_text(static_cast<double>(space.available)));
}

// stage rm: the value head a checkpoint holds beside the adapter or model.
void load_value_head(parallel::ParallelStrategy& strategy, model::ValueHead& head, const fs::path& dir) {
  const model::SafetensorsCheckpoint vhead(dir, "value_head");
  for (auto& p : head.named_parameters()) {
    LF_CHECK(vhead.contains(p.name), ConfigError, "{}: no tensor {} in the checkpoint's value_head.safetensors",
             dir.string(), p.name);
    strategy.load_full_parameter(p.name, model::read_tensor(vhead.info(p.name), vhead.data(p.name)));
  }
}

// Resume: trainable parameter `p`'s value in the checkpoint's weights. The full model is saved in the
// Hub's layout, so a parameter held fused (a layer's experts, [E, 2I, C] / [E, C, I]) is assembled
// from its per-expert tensors, as loading the model does (model/loader.h).
at::Tensor checkpoint_value(const model::CausalLM& m, const model::NamedParam& p, const model::SafetensorsCheckpoint& w,
                            const fs::path& dir, bool lora) {
  if (w.contains(p.name)) return model::read_tensor(w.info(p.name), w.data(p.name));
  for (const auto& spec : m.layout().params)
    if (!lora && spec.name == p.name && spec.hf.size() > 1) {
      auto whole = at::empty(spec.shape, at::kFloat);
      model::read_hf_tensors(spec, w, whole);
      return whole;
    }
  LF_THROW(ConfigError, "{}: no tensor {} in the checkpoint's {}", dir.string(), p.name, lora ? "adapter" : "model");
}

}  // namespace

void Trainer::State::save_model(const fs::path& dir) {
  // The strategy gives each trainable parameter's full value (fp32 master weights); under a
  // sharded one every rank takes part in the gathers and rank 0 writes.
  const bool write = rank == 0;
  // A partly frozen model (finetuning_type freeze) saves its frozen parameters as they are.
  const auto value_of = [this](const model::NamedParam& p) {
    return s.lora || !m.partly_frozen() || p.tensor->requires_grad() ? strategy->full_parameter(p.name) : *p.tensor;
  };
  if (write) fs::create_directories(dir);
  if (s.lora) {
    model::save_lora_adapter(m, *s.lora, dir, c.model.model_name_or_path, value_of, write);
  } else {
    model::SaveOptions o;
    if (!s.model_dir.empty() && fs::is_directory(s.model_dir)) o.copy_files_from = s.model_dir;
    o.dtype = at::kFloat;  // full fine-tuning trains fp32 master weights
    o.value_of = value_of;
    o.write_files = write;
    model::save_causal_lm(m, dir, o);
  }
  // stage rm: the value head beside the adapter or model (LLaMA-Factory's fix_valuehead_checkpoint).
  if (s.value_head) {
    const auto w = strategy->full_parameter("v_head.summary.weight");
    const auto b = strategy->full_parameter("v_head.summary.bias");
    if (write) s.value_head->save(dir / "value_head.safetensors", w, b);
  }
  if (!write) return;
  // The tokenizer next to the weights, as HF Trainer saves it under LLaMA-Factory (output_metadata.h).
  const OutputTokenizer* tok = s.output_tokenizer ? &*s.output_tokenizer : nullptr;
  save_tokenizer_files(s.model_dir, dir, tok);
  if (!s.lora && tok) align_model_metadata(dir, *tok);
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
  if (world == 1) return mine;
  // Each rank's streams differ (seeded from (seed, rank), then drawn by batches of their own
  // shapes): one byte row per rank, split back by the sizes, equal on every rank.
  std::vector<at::Tensor> parts;
  for (const auto& [key, t] : mine) parts.push_back(t.contiguous().view(-1));
  const auto every = strategy->all_gather_bytes(at::cat(parts));
  TensorList out = mine;  // rank 0's under the plain names: what a 1-rank resume restores
  for (int64_t r = 0; r < world; ++r) {
    int64_t offset = 0;
    for (const auto& [key, t] : mine) {
      out.emplace_back(fmt::format("rank{}.{}", r, key), every[r].narrow(0, offset, t.numel()).clone());
      offset += t.numel();
    }
  }
  return out;
}

void Trainer::State::save_checkpoint(const LoopState& loop) {
  const auto rng = rng_states_to_save();  // every rank: a collective when world > 1
  const fs::path out(c.output.output_dir);
  ckpt::RankCommit commit;
  commit.tag = fmt::format("checkpoint-{}", loop.global_step);
  commit.final_dir = out / commit.tag;
  commit.tmp = out / fmt::format(".{}.tmp", commit.tag);
  commit.rank = rank;
  commit.world = world;
  if (rank == 0) check_room_for_checkpoint(out, strategy->num_trainable(), loop.global_step);
  fs::create_directories(commit.tmp);  // every rank: whoever comes first
  logs.last_save_step = loop.global_step;
  const auto mine = strategy->save_optimizer_state(commit.tmp);
  if (rank == 0 || strategy->saving_is_collective()) save_model(commit.tmp);
  if (rank == 0) {
    write_json_file(commit.tmp / "trainer_state.json", trainer_state(loop.global_step, loop.epoch), 2);
    json lf_state = {{"global_step", loop.global_step},
                     {"scheduler_step", stepper.sched_step},
                     {"optimizer_steps", strategy->optimizer_steps()},
                     {"loss_scale", stepper.scaler.scale()},
                     {"growth_tracker", stepper.scaler.growth_tracker()},
                     {"epoch", loop.epoch},
                     {"seed", c.seed},
                     {"tokens_seen", counts.tokens_seen},
                     {"input_tokens_seen", counts.input_tokens_seen},
                     {"total_flos", counts.flos},
                     {"loop", loop.loop_json()},
                     {"format_version", ckpt::kCheckpointFormat},
                     {"world_size", world},
                     {"global_batch", c.schedule.per_device_train_batch_size * c.schedule.gradient_accumulation_steps * world},
                     // The job that wrote it: an agent restart resumes only its own job's checkpoints.
                     {"run_id", std::getenv("TORCHELASTIC_RUN_ID") ? std::getenv("TORCHELASTIC_RUN_ID") : ""}};
    // DESIGN "RNG": the generators' states (dropout masks continue as if uninterrupted).
    model::save_tensor_file(commit.tmp / "rng_state.safetensors", rng);
    write_json_file(commit.tmp / "lf_trainer_state.json", lf_state, 2);
  }
  // Durable and reported by every rank; rank 0 names the checkpoint once all are.
  ckpt::commit_rank_files(commit, mine, s.commit);
  if (rank == 0 && c.output.save_total_limit && *c.output.save_total_limit > 0)
    rotate_checkpoints(out, commit.final_dir, *c.output.save_total_limit);
}

LoopState Trainer::State::load_checkpoint(const fs::path& dir) {
  const auto state_file = dir / "lf_trainer_state.json";
  LF_CHECK(fs::exists(state_file), ConfigError,
           "resume_from_checkpoint: {} is not a checkpoint written by lf-train (no lf_trainer_state.json)",
           dir.string());
  // Rank 0 reads every byte against the checksums (if it refuses, the job stops); the other
  // ranks check the sizes only, not reading a shared checkpoint N more times.
  const auto damage = ckpt::checkpoint_damage(dir, rank == 0 ? ckpt::CheckDepth::kChecksums : ckpt::CheckDepth::kSizes);
  if (damage == ckpt::kNoManifest)
    spdlog::warn("{} has no {} (written by an older lf-train): its files are not verified", dir.string(),
                 ckpt::kManifestFile);
  else
    LF_CHECK(damage.empty(), ConfigError,
             "resume_from_checkpoint: {} is damaged: {} (a save that did not finish, or a disk error); resume from "
             "an earlier checkpoint-N", dir.string(), damage);
  std::ifstream in(state_file);
  const json st = json::parse(in, nullptr, /*allow_exceptions=*/false);
  LF_CHECK(st.is_object(), ConfigError, "resume_from_checkpoint: {} is not valid JSON", state_file.string());
  ckpt::check_format_version(st, dir);
  LF_CHECK(st.value("seed", c.seed) == c.seed, ConfigError,
           "resume_from_checkpoint: {} was written with seed {}, this run has seed {}: the example order would differ",
           dir.string(), st.value("seed", c.seed), c.seed);
  c10::NoGradGuard no_grad;
  // Weights: the adapter, or the full model, through the strategy (it knows where they live).
  const model::SafetensorsCheckpoint weights(dir, s.lora ? "adapter_model" : "model");
  for (auto& p : model::trainable_parameters(m, s.lora.has_value()))
    strategy->load_full_parameter(p.name, checkpoint_value(m, p, weights, dir, s.lora.has_value()));
  if (s.value_head) load_value_head(*strategy, *s.value_head, dir);
  strategy->load_optimizer_state(dir, st.at("optimizer_steps").get<int64_t>());
  stepper.sched_step = st.at("scheduler_step").get<int64_t>();
  stepper.scaler.set_state(st.at("loss_scale").get<double>(), st.at("growth_tracker").get<int64_t>());
  counts.tokens_seen = st.value("tokens_seen", int64_t{0});
  counts.input_tokens_seen = st.value("input_tokens_seen", int64_t{0});
  counts.flos = st.value("total_flos", 0.0);
  if (fs::exists(dir / "trainer_state.json")) {
    std::ifstream ts(dir / "trainer_state.json");
    logs.log_history = json::parse(ts).value("log_history", json::array());
  }
  if (fs::exists(dir / "rng_state.safetensors")) {
    const auto rng = model::load_tensor_file(dir / "rng_state.safetensors");
    auto restore = [&](const char* key, c10::Device d) {
      // This rank's own state; else rank 0's (a 1-rank checkpoint, or more ranks than it had).
      auto it = rng.find(fmt::format("rank{}.{}", rank, key));
      if (it == rng.end()) it = rng.find(key);
      if (it == rng.end()) return;
      auto gen = at::globalContext().defaultGenerator(d);
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(it->second);
    };
    restore("cpu", c10::Device(c10::DeviceType::CPU));
    if (device.is_cuda()) restore("cuda", device);
  }
  LoopState loop;
  loop.global_step = st.at("global_step").get<int64_t>();
  logs.last_save_step = loop.global_step;
  // As HF, a resumed step keeps its count under another global batch (the data resumes at that
  // step of the new order, the schedule at that step of the new total): say so, once.
  const int64_t batch = c.schedule.per_device_train_batch_size * c.schedule.gradient_accumulation_steps * world;
  if (const int64_t saved = st.value("global_batch", int64_t{0}); saved > 0 && saved != batch)
    spdlog::warn("{} was written with a global batch of {} examples a step ({} rank(s) then), this run's is {} "
                 "(per_device_train_batch_size {} x gradient_accumulation_steps {} x {} rank(s)): as HF does, the "
                 "run resumes after step {} of the new schedule's {}, at example {} of the epoch's order (it had "
                 "trained on {} examples, this schedule counts {})",
                 dir.string(), saved, st.value("world_size", int64_t{0}), batch, c.schedule.per_device_train_batch_size,
                 c.schedule.gradient_accumulation_steps, world, loop.global_step, logs.total_steps,
                 (loop.global_step % std::max<int64_t>(1, logs.steps_per_epoch)) * batch, loop.global_step * saved,
                 loop.global_step * batch);
  loop.epoch = st.at("epoch").get<double>();
  const auto& saved_loop = st.at("loop");
  loop.loss_since_log = saved_loop.at("loss_since_log").get<double>();
  loop.total_loss = saved_loop.at("total_loss").get<double>();
  loop.last_logged = saved_loop.at("last_logged").get<int64_t>();
  return loop;
}

}  // namespace lf::train
