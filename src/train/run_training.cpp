#include "lf/train/run_training.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>

#include "lf/ckpt/rank_commit.h"
#include "lf/comm/process_group.h"
#include "lf/comm/rank_agreement.h"
#include "lf/common/output_set.h"
#include "lf/common/env.h"
#include "lf/common/env_knobs.h"
#include "lf/common/error.h"
#include "lf/common/hash.h"
#include "lf/common/log.h"
#include "lf/common/progress_deadline.h"
#include "lf/common/remove_tree.h"
#include "lf/config/elastic_batch.h"
#include "lf/config/expert_parallel.h"
#include "lf/config/sharding.h"
#include "lf/data/chat_template.h"
#include "lf/data/sft_dataset.h"
#include "lf/model/config.h"
#include "lf/model/tensor_io.h"
#include "lf/model/freeze.h"
#include "lf/model/fused_dispatch.h"
#include "lf/model/initial_weights.h"
#include "lf/model/kernel_paths.h"
#include "lf/model/bnb4_linear.h"
#include "lf/model/fp8_linear.h"
#include "lf/model/loader.h"
#include "lf/model/lora.h"
#include "lf/model/sdpa.h"
#include "lf/model/value_head.h"
#include "lf/offload/host_memory.h"
#include "lf/offload/host_thread_pool.h"
#include "lf/parallel/make_strategy.h"
#include "fp8_device.h"
#include "lf/plan/memory_model.h"
#include "lf/plan/model_units.h"
#include "lf/rendezvous/store_client.h"
#include "lf/train/batch.h"
#include "lf/train/predict_run.h"
#include "lf/train/trainer.h"
#include "worker_device.h"

namespace lf::train {
namespace fs = std::filesystem;

c10::Device pick_device() {
  if (!at::hasCUDA()) return {c10::DeviceType::CPU};
  const char* lr = std::getenv("LOCAL_RANK");
  const int count = std::max<int>(1, static_cast<int>(at::detail::getCUDAHooks().deviceCount()));
  const c10::Device device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>((lr ? std::atoi(lr) : 0) % count));
  c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->setDevice(device);
  return device;
}

namespace {

void check_output_dir(const config::JobPlan& c) {
  LF_CHECK(!c.output.output_dir.empty(), ConfigError, "output_dir is empty");
  const fs::path out(c.output.output_dir);
  if (!fs::exists(out)) return;
  LF_CHECK(fs::is_directory(out), ConfigError, "output_dir {} exists and is not a folder", out.string());
  LF_CHECK(c.output.overwrite_output_dir || output_dir_is_empty(out), ConfigError,
           "output_dir {} already exists and is not empty; set overwrite_output_dir: true to write over it, "
           "resume_from_checkpoint: {}/checkpoint-N to continue that run, or choose another output_dir",
           out.string(), out.string());
}

// The highest checkpoint-N in output_dir that lf-train finished writing (renamed into
// place); with `run_id`, only those this job wrote.
fs::path last_checkpoint(const fs::path& out, const std::string& run_id = "") {
  std::map<int64_t, fs::path, std::greater<>> by_step;  // newest first
  if (!fs::is_directory(out)) return {};
  for (const auto& e : fs::directory_iterator(out)) {
    const auto name = e.path().filename().string();
    if (!e.is_directory() || name.rfind("checkpoint-", 0) != 0 || !fs::exists(e.path() / "lf_trainer_state.json"))
      continue;
    if (!run_id.empty()) {
      std::ifstream in(e.path() / "lf_trainer_state.json");
      const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
      if (!j.is_object() || j.value("run_id", std::string()) != run_id) continue;
    }
    try {
      by_step[std::stoll(name.substr(11))] = e.path();
    } catch (const std::exception&) {
    }
  }
  // A checkpoint whose files are not what its manifest lists (a disk that failed under it) is
  // passed over for the one before; the load checks the checksums too.
  for (const auto& [step, path] : by_step) {
    const auto damage = ckpt::checkpoint_damage(path, ckpt::CheckDepth::kSizes);
    if (damage.empty() || damage == ckpt::kNoManifest) return path;
    spdlog::warn("{} is damaged ({}): trying the checkpoint before it", path.string(), damage);
  }
  return {};
}

// Data parallel without tokenized_path: the workers of a node share a folder of this job;
// the first to take its lock tokenizes and the others wait on the lock and load that result.
// So tokenization runs once per node, and before any communicator exists: no collective
// timeout runs while a large dataset is prepared. Under lf-train the folder is in the agent's
// LF_NODE_SCRATCH (unique to the job, removed by the agent however the job ends); under
// another launcher (torchrun) it is named after the job's rendezvous endpoint and id, so two
// jobs on one host never share it. Empty: not needed.
fs::path job_tokenized_dir(const config::JobPlan& c, const comm::WorldInfo& world) {
  if (!c.data.tokenized_path.empty() || world.local_world_size < 2) return {};
  if (const auto scratch = knob_string("LF_NODE_SCRATCH")) return fs::path(*scratch) / "tokenized";
  std::string job;
  for (const char* var : {"LF_RDZV_ADDR", "LF_RDZV_PORT", "TORCHELASTIC_RUN_ID"})
    job += env_string(var).value_or("") + "|";
  return fs::temp_directory_path() / fmt::format("lf-train-{}-tokenized-{}", ::getuid(), hex64(fnv1a64(job)));
}

// The dtype the checkpoint's weights are stored in (config.json's torch_dtype / dtype).
at::ScalarType checkpoint_dtype(const std::string& model_name_or_path) {
  const fs::path p(model_name_or_path);
  return model::scalar_type_from_name(model::load_model_config(fs::is_directory(p) ? p / "config.json" : p).torch_dtype);
}

// The activations' dtype. pure_bf16 (LLaMA-Factory loads with torch_dtype "auto" and casts nothing up): the
// checkpoint's own dtype, bf16 when bf16: true asks HF's autocast for it.
at::ScalarType compute_dtype_of(const config::JobPlan& c) {
  const auto& p = c.precision;
  if (!p.fp32_master() && !p.bf16) return checkpoint_dtype(c.model.model_name_or_path);
  return p.bf16_compute() ? at::kBFloat16 : p.fp16 ? at::kHalf : at::kFloat;
}

int32_t max_token_id(const TokenizedDataset& d) {
  int32_t m = -1;
  for (size_t i = 0; i < d.size(); ++i)
    for (auto id : d.input_ids(i)) m = std::max(m, id);
  return m;
}

// Resume: the checkpoint named in the config; else, as LLaMA-Factory does, the last
// checkpoint of output_dir when overwrite_output_dir is false; and always after the agent
// restarted this worker (TORCHELASTIC_RESTART_COUNT > 0). Every rank agrees on it.
fs::path resolve_resume(const config::JobPlan& c, const comm::WorldInfo& world) {
  fs::path resume = c.output.resume_from_checkpoint;
  if (resume.empty()) {
    const char* restarts = std::getenv("TORCHELASTIC_RESTART_COUNT");
    const char* run_id = std::getenv("TORCHELASTIC_RUN_ID");
    const bool restarted = restarts && std::atoll(restarts) > 0 && run_id && *run_id;
    // After a restart, only this job's checkpoints (a stale run's must not be picked up).
    const auto last = c.output.overwrite_output_dir ? (restarted ? last_checkpoint(c.output.output_dir, run_id) : fs::path())
                                             : last_checkpoint(c.output.output_dir);
    if (!last.empty()) {
      resume = last;
      spdlog::info("resuming training from {}{}", last.string(), restarted ? " (worker restart)" : "");
    } else {
      check_output_dir(c);
    }
  } else if (c.output.resume_from_checkpoint == "true" || c.output.resume_from_checkpoint == "True") {
    resume = last_checkpoint(c.output.output_dir);  // HF: resume_from_checkpoint=True -> the last one
    LF_CHECK(!resume.empty(), ConfigError, "resume_from_checkpoint: true, but {} holds no checkpoint-N written by lf-train",
             c.output.output_dir);
  } else {
    LF_CHECK(fs::is_directory(resume), ConfigError,
             "resume_from_checkpoint: {} is not a folder (give output_dir/checkpoint-N)", resume.string());
  }
  if (world.world_size > 1) {
    // Every rank resumes from the same checkpoint, or none: a node that cannot see output_dir's
    // checkpoints (not on a filesystem every node shares) would start at step 0 and the ranks
    // would hang in different steps' collectives.
    auto store = rdzv::StoreClient::from_env();
    comm::require_same_on_every_rank(store, fmt::format("train/g{}", world.generation), world.rank,
                                     world.world_size, "resume checkpoint",
                                     resume.empty() ? std::string("none (a fresh start)") : resume.string(),
                                     std::chrono::minutes(5), "output_dir on a filesystem every node shares");
  }
  return resume;
}

// Offload pins 16 bytes a trainable parameter of the offloaded units over the world (master,
// moments, gradient; offload_ratio's share: lf/plan/memory_model.h) in host memory: checked
// against the node's and the container's room before anything loads, not an OOM kill after the
// model did. Local rank 0 checks for the node's workers.
void check_offload_host_memory(const config::JobPlan& c, const comm::WorldInfo& world) {
  if (c.parallel.offload == "none" || world.local_rank != 0) return;
  const fs::path src(c.model.model_name_or_path);
  const auto mc = model::load_model_config(fs::is_directory(src) ? src / "config.json" : src);
  const double per_rank = plan::predict_memory(c, mc, {1, world.world_size}).host_total();  // the world's size is what counts
  const auto trainable = plan::parameter_counts(mc, c.adapter).trainable;
  offload::check_host_memory(static_cast<uint64_t>(per_rank * static_cast<double>(world.local_world_size)),
                             fmt::format("offload: {}: fp32 master weights, AdamW moments and gradients of {:.2f}B "
                                         "trainable parameters{} over {} rank(s), {} worker(s) on this node",
                                         c.parallel.offload, static_cast<double>(trainable) / 1e9,
                                         c.parallel.offload_ratio < 1 ? fmt::format(" x offload_ratio {}", c.parallel.offload_ratio) : "",
                                         world.world_size, world.local_world_size));
}

// The loaded model against the job: the rows it attends over, its RoPE, the tokenizer's and the data's ids.
void check_model_fits(const config::JobPlan& c, const model::CausalLM& model, const Tokenizer& tokenizer,
                      const SftData& data) {
  const int64_t vocab = model.config().vocab_size;
  // Mistral's sliding window: full causal attention is the same function on rows no longer than it.
  const int64_t window = model.config().sliding_window;
  LF_CHECK(window == 0 || c.data.cutoff_len <= window, ConfigError,
           "{} attends over a sliding window of {} tokens, and lf-train's attention is full causal: rows of up to "
           "cutoff_len {} tokens would be trained differently; set cutoff_len <= {}",
           c.model.model_name_or_path, window, c.data.cutoff_len, window);
  // Dynamic NTK RoPE is the default one on positions below max_position_embeddings (transformers
  // rescales the base only for a longer batch, and keeps the longer base for later batches).
  const auto& mc = model.config();
  LF_CHECK(mc.rope.type != "dynamic" || c.data.cutoff_len <= mc.max_position_embeddings, ConfigError,
           "{}: rope_type dynamic rescales RoPE for rows longer than max_position_embeddings {}, depending on the "
           "batches seen before, which lf-train does not replay; set cutoff_len <= {}",
           c.model.model_name_or_path, mc.max_position_embeddings, mc.max_position_embeddings);
  LF_CHECK(tokenizer.vocab_size() <= vocab, ConfigError,
           "the tokenizer at {} has {} tokens but the model's vocab_size is {}: token ids would index outside the "
           "embedding (use the tokenizer that belongs to this model)",
           tokenizer.source().string(), tokenizer.vocab_size(), vocab);
  const int32_t max_id = std::max(max_token_id(data.train), max_token_id(data.eval));
  LF_CHECK(max_id < vocab, ConfigError, "the dataset holds token id {} but the model's vocab_size is {}", max_id, vocab);
}

// The weights' dtype as loaded (the master-weight question, asked once here: lf/config/job_plan.h fp32_master).
at::ScalarType param_dtype_of(const config::JobPlan& c, at::ScalarType compute) {
  if (c.adapter.finetuning_type == "lora") return compute;
  if (c.precision.fp32_master()) return at::kFloat;
  const auto stored = checkpoint_dtype(c.model.model_name_or_path);
  if (stored == at::kFloat)
    spdlog::warn("pure_bf16: {} stores float32 weights, and LLaMA-Factory keeps a checkpoint's dtype: it trains in "
                 "float32 (so does lf-train). pure_bf16 trains in bf16 on a bf16 checkpoint",
                 c.model.model_name_or_path);
  return stored;
}

// The model on this worker's `device` (pick_device), checked against the tokenizer and data, with LoRA
// applied when asked (its config into *lora).
std::unique_ptr<model::CausalLM> load_model(const config::JobPlan& c, c10::Device device, const Tokenizer& tokenizer,
                                            const SftData& data, std::optional<model::LoraConfig>& lora,
                                            std::unique_ptr<model::ValueHead>& value_head) {
  // torch's CPU generator as LLaMA-Factory's run has it after transformers.set_seed(seed): peft's LoRA
  // draws, then (stage rm) the value head's.
  auto init_gen = at::detail::createCPUGenerator(static_cast<uint64_t>(c.seed));
  model::LoadOptions lo;
  lo.device = device;
  // init_weights auto | pretrained | random against what the folder holds (lf/model/initial_weights.h).
  const auto initial = model::choose_initial_weights(c.model.model_name_or_path, c.model.init_weights, c.seed);
  if (!initial.note.empty() && !knob_bool("LF_CONFIG_CHECKED").value_or(false)) spdlog::warn("{}", initial.note);
  lo.random_init = initial.random;
  lo.seed = static_cast<uint64_t>(c.seed);
  const auto mixed = compute_dtype_of(c);
  // LoRA: a frozen base in the compute dtype, fp32 adapters (LLaMA-Factory upcasts trainable parameters, peft
  // its adapters). Full / freeze: fp32 master weights, activations in the compute dtype; pure_bf16: the weights
  // as the checkpoint stores them (bf16 for the usual checkpoint), trained so.
  lo.param_dtype = param_dtype_of(c, mixed);
  if (c.precision.quantized()) lo.quantize = model::bnb4_spec_of(c.precision);
  auto model = model::load_causal_lm(c.model.model_name_or_path, lo);
  if (const auto q = model::quantized_base(*model); q.linears > 0) spdlog::info("{}", model::describe(q));
  model->set_compute_dtype(mixed);
  check_model_fits(c, *model, tokenizer, data);
  const int64_t vocab = model->config().vocab_size;
  if (c.adapter.peft()) {
    model::LoraConfig lc;
    lc.rank = c.adapter.lora_rank;
    lc.alpha = c.adapter.lora_alpha > 0 ? c.adapter.lora_alpha : -1;
    lc.dropout = c.adapter.lora_dropout;
    lc.target = c.adapter.lora_target;
    lc.use_rslora = c.adapter.use_rslora;
    lc.use_dora = c.adapter.use_dora;
    lc.pissa = c.adapter.pissa_init;
    lc.pissa_iter = c.adapter.pissa_iter;
    lc.modules_to_save = c.adapter.additional_target;
    lc.seed = static_cast<uint64_t>(c.seed);
    if (c.adapter.oft()) lc.oft = model::OftConfig{.rank = c.adapter.oft_rank, .block_size = c.adapter.oft_block_size};
    std::vector<fs::path> adapters(c.adapter.adapter_name_or_path.begin(), c.adapter.adapter_name_or_path.end());
    lora = model::prepare_lora(*model, lc, adapters, c.adapter.create_new_adapter, &init_gen);
    if (!adapters.empty())
      spdlog::info("adapters: {} merged{}", c.adapter.create_new_adapter ? adapters.size() : adapters.size() - 1,
                   c.adapter.create_new_adapter ? ", a new one trained" : fmt::format(", {} trained on", adapters.back().string()));
  } else if (c.adapter.finetuning_type == "freeze") {
    model::FreezeConfig fc;
    fc.trainable_layers = c.adapter.freeze_trainable_layers;
    fc.trainable_modules = c.adapter.freeze_trainable_modules;
    fc.extra_modules = c.adapter.freeze_extra_modules;
    fc.llama_pro = c.adapter.use_llama_pro;
    model::apply_freeze(*model, fc);
  }
  if (c.precision.fp8)  // after LoRA / freeze chose what trains; LoRA's frozen base stored in FP8
    spdlog::info("{}", model::describe(model::use_fp8(*model, quant::fp8_recipe_from_name(c.precision.fp8_recipe),
                                                      c.adapter.lora())));
  spdlog::info("model: {} ({} layers, vocab {}) on {}, {}{}, weights {}, compute {}{}", c.model.model_name_or_path,
               model->num_layers(), vocab, lo.device.str(), c.adapter.finetuning_type,
               c.adapter.lora()  ? fmt::format(" rank {}", c.adapter.lora_rank)
               : c.adapter.oft() ? fmt::format(" rank {} block size {}", c.adapter.oft_rank, c.adapter.oft_block_size)
                                 : std::string(),
               c10::toString(lo.param_dtype), c10::toString(mixed),
               c.model.gradient_checkpointing ? ", gradient checkpointing" : "");
  if (c.objective.stage == "rm") {
    const fs::path src(c.model.model_name_or_path);
    value_head = std::make_unique<model::ValueHead>(*model, init_gen,
                                                    model::value_head_dropout(fs::is_directory(src) ? src : src.parent_path()));
    spdlog::info("value head: Linear({}, 1) on the final hidden states, dropout {}", model->config().hidden_size,
                 value_head->dropout());
  }
  if (c.model.kernels.sdpa_backend != "auto") {  // what SDPA now picks for this model's training attention
    const auto& mc = model->config();
    spdlog::info("attention: LF_SDPA_BACKEND={}: SDPA runs {}", c.model.kernels.sdpa_backend,
                 model::sdpa_backend_for(1, 16, mc.num_heads, mc.num_kv_heads, mc.head_dim,
                                         at::TensorOptions().dtype(mixed).device(lo.device)));
  }
  const auto layers = model::fused_kernels_status();  // also validates LF_FUSED_KERNELS on CPU
  if (lo.device.is_cuda()) spdlog::info("layers: {}", layers);
  return model;
}

// How the job distributes its steps: the communicator (NCCL on GPU, TCP on CPU), the strategy
// over it (single process, DDP, ZeRO: parallel/make_strategy.h), and the channel through which
// ranks report their checkpoint files durable (the job's store).
struct JobStrategy {
  std::unique_ptr<comm::Communicator> communicator;
  std::unique_ptr<parallel::ParallelStrategy> strategy;
  std::unique_ptr<rdzv::StoreClient> commit_store;
  std::unique_ptr<ckpt::CommitChannel> commit;
};

JobStrategy make_job_strategy(const config::JobPlan& c, const comm::WorldInfo& world, model::CausalLM& model,
                              bool lora, const SftData& data, model::ValueHead* value_head) {
  JobStrategy j;
  config::check_expert_parallel(c, world.world_size, model.config().moe.num_experts);
  const auto device = model.lm_head_weight().device();
  if (world.world_size > 1) j.communicator = comm::make_default_communicator(world, device.is_cuda());
  parallel::StrategySetup ss;
  ss.model = &model;
  ss.trainable = model::trainable_parameters(model, lora);
  if (value_head)
    for (auto& p : value_head->named_parameters()) ss.trainable.push_back(p);
  ss.lora = lora;
  ss.optim = c.optim;
  ss.rank = world.rank;
  ss.world = world.world_size;
  ss.communicator = j.communicator.get();
  parallel::StrategyContext ctx;
  ctx.compute_dtype = model.compute_dtype();
  ctx.longest_row = longest_padded_row(data.train);
  ctx.host_threads = offload::host_adam_threads_for_this_worker();
  // The preference stages' forwards hold two rows an example (a pair, or KTO's target and KL rows).
  ctx.micro_batch = c.schedule.per_device_train_batch_size * static_cast<int64_t>(data.train.group_size());
  ctx.accumulation = c.schedule.gradient_accumulation_steps;
  j.strategy = parallel::make_strategy(c.parallel, std::move(ss), ctx);
  if (world.world_size > 1 || c.parallel.zero_stage > 0) spdlog::info("{}", j.strategy->describe());
  if (world.world_size > 1) {
    j.commit_store = rdzv::StoreClient::connect_from_env();
    j.commit = ckpt::make_store_commit_channel(*j.commit_store, fmt::format("ckpt/g{}", world.generation));
  }
  return j;
}

// The tokenizer LLaMA-Factory saves with the outputs: its template's special tokens
// (get_template_and_fix_tokenizer) and chat template (fix_jinja_template: its own Jinja when the
// template says so or the tokenizer has none, else the tokenizer's kept).
OutputTokenizer output_tokenizer(const DataArgs& args, const Tokenizer& tokenizer, const fs::path& model_dir) {
  const ChatTemplate tmpl = resolve_template(args, tokenizer);
  OutputTokenizer t;
  t.bos_id = tmpl.bos_id();
  t.eos_id = tmpl.eos_id();
  t.pad_id = tmpl.pad_id();
  t.eos_token = tokenizer.id_to_token(t.eos_id);
  t.pad_token = tokenizer.id_to_token(t.pad_id);
  const bool has_own = tokenizer.has_chat_template() || fs::exists(model_dir / "chat_template.jinja");
  if (tmpl.spec().replace_jinja_template || !has_own) t.chat_template = llamafactory_jinja_template(tmpl);
  return t;
}

}  // namespace

void train_from_config(const config::LoadedConfig& loaded) {
  progress_reporter().loading();  // heartbeats to the agent: a liveness thread + phase-aware deadlines
  config::JobPlan c = loaded.plan;  // a copy: an elastic round may change the accumulation
  // lf-train printed these once for the node before starting the workers (LF_CONFIG_CHECKED).
  if (!knob_bool("LF_CONFIG_CHECKED").value_or(false)) {
    for (const auto& w : loaded.warnings) spdlog::warn("{}", w);
    for (const auto& n : loaded.notes) spdlog::info("{}", n);
  }
  model::set_kernel_paths(c.model.kernels);  // before any layer runs: model code reads no environment
  if (!c.predict.do_train) return predict_from_config(loaded);  // do_predict (config rules: nothing else)
  // HF's TrainingArguments refuses fp16 without a GPU (its CPU path would run ~40x slower here).
  LF_CHECK(!c.precision.fp16 || at::hasCUDA(), ConfigError,
           "fp16: true needs a CUDA GPU and this worker has none; HF's TrainingArguments refuses it too (\"FP16 Mixed "
           "precision training ... can only be used on CUDA\"). On a CPU train in fp32 (bf16: false, fp16: false) or "
           "with bf16: true");
  const auto device = pick_device();  // once: it also makes the GPU current
  check_fp8_device(c.precision, device, knob_bool("LF_FP8_EMULATE").value_or(false));  // fp8 on the CPU / a GPU without FP8: refused, never bf16
  choose_fp8_gemm_scaling(c.precision, c.model.kernels.fp8_scales_in_gemm, device);
  const auto world = comm::WorldInfo::from_env();
  // --nnodes MIN:MAX: the first round's global batch on this round's ranks (exit 2 when it cannot be).
  const auto elastic = config::keep_elastic_global_batch(c, knob_int("LF_BASE_WORLD_SIZE").value_or(0), world.world_size);
  if (!elastic.empty() && world.rank == 0) spdlog::info("{}", elastic);
  config::check_world_size(c, world.world_size);  // an elastic job's first round was not checked by lf-train
  // A save that never finished (a killed run, a full disk) left a temporary folder: never
  // valid, and a rerun would fail writing over it at the same step.
  if (world.rank == 0)
    if (const int n = ckpt::remove_stale_temporaries(c.output.output_dir); n > 0)
      spdlog::info("removed {} unfinished checkpoint folder(s) (.checkpoint-N.tmp) from {}", n, c.output.output_dir);
  const fs::path resume = resolve_resume(c, world);
  check_offload_host_memory(c, world);
  DataArgs args = c.data;
  const fs::path job_cache = job_tokenized_dir(c, world);
  if (!job_cache.empty()) args.tokenized_path = job_cache.string();
  progress_reporter().tokenizing();
  const auto tokenizer = load_tokenizer_for(args);
  auto data = load_sft_data(args, tokenizer);
  LF_CHECK(data.train.size() > 0, ConfigError, "the training dataset {} is empty after preprocessing",
           fmt::join(c.data.dataset, ","));
  spdlog::info("data: {} train / {} eval examples, {} train tokens{}", data.train.num_examples(), data.eval.num_examples(),
               data.train.num_tokens(), data.from_cache ? " (tokenized cache)" : "");
  TrainerSetup s;
  s.plan = c;
  progress_reporter().loading();
  std::unique_ptr<model::ValueHead> value_head;
  auto model = load_model(c, device, tokenizer, data, s.lora, value_head);
  s.model = model.get();
  s.value_head = value_head.get();
  s.train = &data.train;
  s.eval = &data.eval;
  s.pad_id = data.pad_id;  // LLaMA-Factory: the tokenizer's pad token, else eos
  const fs::path src(c.model.model_name_or_path);
  s.model_dir = fs::is_directory(src) ? src : src.parent_path();
  s.output_tokenizer = output_tokenizer(args, tokenizer, s.model_dir);
  s.resume_from = resume;
  const auto job = make_job_strategy(c, world, *model, s.lora.has_value(), data, value_head.get());
  s.strategy = job.strategy.get();
  s.commit = job.commit.get();
  // DESIGN "RNG": the global generators (dropout) from (seed, rank), seeded here, after the
  // weights and LoRA init took theirs (the seed alone, identical on every rank).
  at::manual_seed(static_cast<uint64_t>(c.seed) + static_cast<uint64_t>(world.rank));
  Trainer trainer(std::move(s));
  trainer.train();
  progress_reporter().done();
  // Every worker of this node loaded the data before the first collective: nothing reads it now.
  if (!job_cache.empty() && world.local_rank == 0) remove_tree(job_cache);
}

int run_training(const config::LoadedConfig& loaded) {
  try {
    train_from_config(loaded);
    return kExitOk;
  } catch (const Error& e) {
    spdlog::error("{}", e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    spdlog::error("internal error: {}", e.what());
    return kExitInternal;
  }
}

}  // namespace lf::train
