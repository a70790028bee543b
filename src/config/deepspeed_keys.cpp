#include "deepspeed_keys.h"

#include <algorithm>

namespace lf::config {

namespace {

using P = DsPolicy;
using T = DsType;

constexpr DsKey section(std::string_view path, std::string_view note = "") {
  return {path, T::kObject, P::kImplemented, "", "", note};
}
constexpr DsKey implemented(std::string_view path, T type, std::string_view def, std::string_view note,
                            bool auto_ok = false) {
  return {path, type, P::kImplemented, def, "", note, auto_ok};
}
constexpr DsKey matches(std::string_view path, T type, std::string_view note) {
  return {path, type, P::kMatchesYaml, "", "", note, true};
}
constexpr DsKey no_effect(std::string_view path, T type, std::string_view def, std::string_view note,
                          bool auto_ok = false) {
  return {path, type, P::kNoEffect, def, "", note, auto_ok};
}
constexpr DsKey refused(std::string_view path, T type, std::string_view def, std::string_view note,
                        std::string_view accepted = "") {
  return {path, type, P::kRefused, def, accepted, note};
}
constexpr DsKey opaque(std::string_view path, P policy, std::string_view note) {
  return {path, T::kObject, policy, "", "", note, false, true};
}
constexpr DsKey ignored(std::string_view path, std::string_view note) {
  return {path, T::kAny, P::kIgnored, "", "", note, false, true};
}
// The fp16 loss scaler: lf-train's is torch's GradScaler, `accepted` is what it does.
constexpr DsKey scaler(std::string_view path, T type, std::string_view def, std::string_view accepted,
                       std::string_view note) {
  return {path, type, P::kRefused, def, accepted, note, false, false, true};
}

// An implemented key with its observable, sample value and the context it needs (deepspeed_keys.h).
constexpr DsKey acts(DsKey k, std::string_view observable, std::string_view sample, std::string_view context = "",
                     std::string_view yaml_context = "") {
  k.observable = observable;
  k.sample = sample;
  k.context = context;
  k.yaml_context = yaml_context;
  return k;
}
constexpr std::string_view kStage2 = R"({"zero_optimization": {"stage": 2}})";
constexpr std::string_view kStage3 = R"({"zero_optimization": {"stage": 3}})";
constexpr std::string_view kStage3Offload =
    R"({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}})";
constexpr std::string_view kStage3OffloadBoth =
    R"({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "cpu"}}})";
constexpr std::string_view kStage3CpuOffload = R"({"zero_optimization": {"stage": 3, "cpu_offload": true}})";

constexpr std::string_view kScaler =
    "lf-train's fp16 loss scaler is torch's GradScaler (2^16 at start, x2 after 2000 overflow-free steps, x0.5 on "
    "each overflow, no hysteresis), which skips and rescales at other steps than this value asks: set the value "
    "lf-train honours (an fp16 section without it gets DeepSpeed's default), or train with bf16";
constexpr std::string_view kNvmeOnly = "only used with NVMe offload, which lf-train does not do";
constexpr std::string_view kOwnSharding = "lf-train shards every parameter in per-layer units of its own";
constexpr std::string_view kNoLogging =
    "lf-train logs to trainer_log.jsonl and its own perf: line, not to DeepSpeed's monitors";

constexpr DsKey kKeys[] = {
    // ---- batch, clipping, precision: "auto" or the YAML's value (HF's fill_match)
    acts(matches("train_batch_size", T::kInt,
            "per_device_train_batch_size x gradient_accumulation_steps x world size; an explicit value is checked "
            "when the world size is known"), "refused", "7"),
    acts(matches("train_micro_batch_size_per_gpu", T::kInt, "per_device_train_batch_size"), "refused", "7"),
    acts(matches("gradient_accumulation_steps", T::kInt, "gradient_accumulation_steps"), "refused", "7"),
    acts(matches("gradient_clipping", T::kNumber, "max_grad_norm"), "refused", "0.3"),
    section("fp16"),
    acts(matches("fp16.enabled", T::kBool, "fp16"), "refused", "true"),
    scaler("fp16.loss_scale", T::kNumber, "0", "0", kScaler),
    scaler("fp16.initial_scale_power", T::kInt, "16", "16", kScaler),
    scaler("fp16.loss_scale_window", T::kInt, "1000", "2000", kScaler),
    scaler("fp16.hysteresis", T::kInt, "2", "1", kScaler),
    scaler("fp16.consecutive_hysteresis", T::kBool, "false", "false", kScaler),
    no_effect("fp16.min_loss_scale", T::kNumber, "1", "GradScaler has no floor; a scale that low has diverged anyway"),
    no_effect("fp16.fused_mode", T::kBool, "true", "an implementation choice of DeepSpeed's"),
    refused("fp16.auto_cast", T::kBool, "false", "casting the inputs to fp16 is not supported"),
    refused("fp16.fp16_master_weights_and_grads", T::kBool, "false",
            "fp16 master weights are not supported: lf-train keeps fp32 master weights"),
    section("bf16"),
    acts(matches("bf16.enabled", T::kBool, "bf16"), "refused", "true"),
    no_effect("bf16.immediate_grad_update", T::kBool, "true", "an implementation choice of DeepSpeed's"),
    no_effect("bf16.check_grad_overflow", T::kBool, "false", "bf16 needs no overflow check"),
    section("bfloat16", "DeepSpeed's old name of bf16"),
    acts(matches("bfloat16.enabled", T::kBool, "bf16"), "refused", "true"),
    // Must match like the keys above, but HF does not fill "auto" for it.
    acts({"communication_data_type", T::kString, P::kMatchesYaml, "", "",
     "lf-train's ddp_reduce_dtype (fp32 or bf16): the dtype gradients are reduced in"}, "refused", "\"bf16\""),

    // ---- optimizer: lf-train's own AdamW, with the YAML's hyperparameters
    section("optimizer", "lf-train always trains with its own AdamW (HF's defaults)"),
    acts(implemented("optimizer.type", T::kString, "", "Adam or AdamW (DeepSpeed's Adam is AdamW); others are refused"),
         "refused", "\"Lamb\""),
    section("optimizer.params"),
    acts(matches("optimizer.params.lr", T::kNumber, "learning_rate"), "refused", "0.5"),
    acts(matches("optimizer.params.betas", T::kList, "[adam_beta1, adam_beta2]"), "refused", "[0.5, 0.5]"),
    acts(matches("optimizer.params.eps", T::kNumber, "adam_epsilon"), "refused", "0.5"),
    acts(matches("optimizer.params.weight_decay", T::kNumber, "weight_decay"), "refused", "0.5"),
    refused("optimizer.params.adam_w_mode", T::kBool, "true", "Adam with L2 regularisation instead of AdamW"),
    refused("optimizer.params.bias_correction", T::kBool, "true", "Adam without bias correction"),
    refused("optimizer.params.amsgrad", T::kBool, "false", "AMSGrad"),
    no_effect("optimizer.params.torch_adam", T::kBool, "false", "which Adam kernel DeepSpeed runs"),
    no_effect("optimizer.legacy_fusion", T::kBool, "false", "an implementation choice of DeepSpeed's"),
    opaque("scheduler", P::kRefused,
           "a DeepSpeed scheduler replaces the YAML's lr_scheduler_type (and WarmupLR warms up logarithmically by "
           "default); lf-train follows lr_scheduler_type and warmup_*: remove the scheduler section"),
    no_effect("zero_allow_untested_optimizer", T::kBool, "false", "lf-train's own AdamW needs no permission"),
    no_effect("zero_force_ds_cpu_optimizer", T::kBool, "true", "lf-train's own AdamW"),

    // ---- ZeRO
    section("zero_optimization"),
    acts(implemented("zero_optimization.stage", T::kInt, "0",
                     "zero_stage: 0 (DDP), 1, 2 or 3; other values are refused"),
         "log:ZeRO-", "2"),
    acts(implemented("zero_optimization.overlap_comm", T::kBool, "",
                "overlap_comm (DeepSpeed's default: true at stage 3, else false): false waits for each gradient "
                "reduction as it is issued (no overlap with backward)"), "log:reduction", "false", kStage3),
    acts(implemented("zero_optimization.reduce_bucket_size", T::kNumber, "5e8",
                "reduce_bucket_mb (elements; \"auto\": hidden_size^2): as many units' gradient reductions stay in "
                "flight as fit, at least two", true), "log:reductions in flight", "1000", kStage3),
    acts(implemented("zero_optimization.allgather_bucket_size", T::kNumber, "5e8",
                "allgather_bucket_mb (elements): stages 1, 2 keep as many units' all-gathers of the new parameters "
                "in flight as fit, at least one"), "log:update all-gather", "1000", kStage2),
    acts(implemented("zero_optimization.stage3_prefetch_bucket_size", T::kNumber, "5e7",
                "prefetch_bucket_mb (elements; \"auto\": 0.9 x hidden_size^2): stage 3 gathers as many units ahead "
                "as fit, at least one (0: no prefetch)", true), "log:prefetch", "0", kStage3),
    acts(implemented("zero_optimization.prefetch_bucket_size", T::kNumber, "5e7",
                "DeepSpeed's other name of stage3_prefetch_bucket_size", true), "log:prefetch", "0", kStage3),
    no_effect("zero_optimization.contiguous_gradients", T::kBool, "true",
              "lf-train always reduces from contiguous buckets (a memory layout of DeepSpeed's)"),
    no_effect("zero_optimization.reduce_scatter", T::kBool, "true",
              "lf-train always reduce-scatters sharded gradients (DeepSpeed's all-reduce fallback)"),
    section("zero_optimization.offload_optimizer"),
    acts(implemented("zero_optimization.offload_optimizer.device", T::kString, "\"none\"",
                "cpu: offload optimizer (state and step on the CPU); none; nvme is refused"),
         "log:ZeRO-", "\"cpu\"", kStage3),
    acts(implemented("zero_optimization.offload_optimizer.pin_memory", T::kBool, "false",
                "pin_memory: offloaded state page-locked on a GPU run (false: pageable, slower copies)"),
         "log:in host memory", "true", kStage3Offload),
    no_effect("zero_optimization.offload_optimizer.nvme_path", T::kString, "", kNvmeOnly),
    no_effect("zero_optimization.offload_optimizer.buffer_count", T::kInt, "4", kNvmeOnly),
    no_effect("zero_optimization.offload_optimizer.pipeline_read", T::kBool, "false", kNvmeOnly),
    no_effect("zero_optimization.offload_optimizer.pipeline_write", T::kBool, "false", kNvmeOnly),
    no_effect("zero_optimization.offload_optimizer.fast_init", T::kBool, "false", kNvmeOnly),
    acts(implemented("zero_optimization.offload_optimizer.ratio", T::kNumber, "1.0",
                "offload_ratio: the share of the optimizer on the host (ZeRO-Offload++); whole units from the head "
                "down, the rest steps on the GPU"), "log:ZeRO-", "0.5", kStage3Offload),
    refused("zero_optimization.offload_optimizer.super_offload", T::kBool, "false",
            "SuperOffload (Grace-Hopper superchips) is not supported"),
    no_effect("zero_optimization.offload_optimizer.convert_grad_on_cpu", T::kBool, "true",
              "an implementation choice of DeepSpeed's CPU Adam"),
    no_effect("zero_optimization.offload_optimizer.cpuadam_cores_perc", T::kNumber, "0.8",
              "a tuning knob of DeepSpeed's CPU Adam"),
    section("zero_optimization.offload_param"),
    acts(implemented("zero_optimization.offload_param.device", T::kString, "\"none\"",
                "cpu: offload params (parameters and optimizer; stage 3 only); none; nvme is refused"),
         "log:ZeRO-", "\"cpu\"", kStage3Offload),
    acts(implemented("zero_optimization.offload_param.pin_memory", T::kBool, "false",
                "pin_memory: offloaded state page-locked on a GPU run (false: pageable, slower copies)"),
         "log:in host memory", "true", kStage3OffloadBoth),
    no_effect("zero_optimization.offload_param.nvme_path", T::kString, "", kNvmeOnly),
    no_effect("zero_optimization.offload_param.buffer_count", T::kInt, "5", kNvmeOnly),
    no_effect("zero_optimization.offload_param.buffer_size", T::kNumber, "1e8", kNvmeOnly),
    no_effect("zero_optimization.offload_param.max_in_cpu", T::kNumber, "1e9", kNvmeOnly),
    acts(implemented("zero_optimization.cpu_offload", T::kBool, "false",
                "DeepSpeed's deprecated offload_optimizer {device: cpu}"), "log:ZeRO-", "true", kStage2),
    acts(implemented("zero_optimization.cpu_offload_param", T::kBool, "false",
                "DeepSpeed's deprecated offload_param {device: cpu}"), "log:ZeRO-", "true", kStage3CpuOffload),
    acts(implemented("zero_optimization.cpu_offload_use_pin_memory", T::kBool, "false",
                "DeepSpeed's deprecated pin_memory"), "log:in host memory", "true", kStage3CpuOffload),
    no_effect("zero_optimization.sub_group_size", T::kNumber, "1e9", kOwnSharding),
    no_effect("zero_optimization.stage3_param_persistence_threshold", T::kNumber, "1e5", kOwnSharding, true),
    no_effect("zero_optimization.stage3_model_persistence_threshold", T::kNumber, "9223372036854775807",
              kOwnSharding),
    no_effect("zero_optimization.stage3_max_live_parameters", T::kNumber, "1e9",
              "lf-train holds the current unit and those stage3_prefetch_bucket_size prefetches"),
    no_effect("zero_optimization.stage3_max_reuse_distance", T::kNumber, "1e9",
              "lf-train frees a unit after use and gathers it again in backward"),
    no_effect("zero_optimization.stage3_gather_16bit_weights_on_model_save", T::kBool, "false",
              "lf-train always saves full HF weights (16-bit or fp32, as under DDP), never sharded ones"),
    no_effect("zero_optimization.stage3_gather_fp16_weights_on_model_save", T::kBool, "false",
              "lf-train always saves full HF weights (16-bit or fp32, as under DDP), never sharded ones"),
    no_effect("zero_optimization.round_robin_gradients", T::kBool, "false",
              "a CPU-offload copy optimisation of DeepSpeed's"),
    no_effect("zero_optimization.allgather_partitions", T::kBool, "true", "lf-train always all-gathers"),
    no_effect("zero_optimization.load_from_fp32_weights", T::kBool, "true",
              "lf-train's checkpoints always hold the fp32 master weights"),
    no_effect("zero_optimization.elastic_checkpoint", T::kBool, "false",
              "lf-train's checkpoints resume at any world size and stage"),
    no_effect("zero_optimization.ignore_unused_parameters", T::kBool, "true", "every trainable parameter is used"),
    no_effect("zero_optimization.legacy_stage1", T::kBool, "false", "an implementation choice of DeepSpeed's"),
    no_effect("zero_optimization.memory_efficient_linear", T::kBool, "true", "an implementation choice of DeepSpeed's"),
    no_effect("zero_optimization.pipeline_loading_checkpoint", T::kBool, "false", "no pipeline parallelism"),
    no_effect("zero_optimization.override_module_apply", T::kBool, "true", "an implementation choice of DeepSpeed's"),
    no_effect("zero_optimization.log_trace_cache_warnings", T::kBool, "false", "DeepSpeed's diagnostics"),
    no_effect("zero_optimization.enable_sanity_checks", T::kBool, "false", "DeepSpeed's diagnostics"),
    no_effect("zero_optimization.use_multi_rank_bucket_allreduce", T::kBool, "true",
              "an implementation choice of DeepSpeed's"),
    no_effect("zero_optimization.stage3_module_granularity_threshold", T::kNumber, "0", kOwnSharding),
    no_effect("zero_optimization.stage3_use_all_reduce_for_fetch_params", T::kBool, "false", kOwnSharding),
    no_effect("zero_optimization.stage3_allgather_sequential", T::kBool, "false", kOwnSharding),
    no_effect("zero_optimization.stage3_partition_stream_chunk_size", T::kNumber, "0", kOwnSharding),
    no_effect("zero_optimization.save_muon_momentum_buffer_in_memory", T::kBool, "false", kNvmeOnly),
    no_effect("zero_optimization.mics_hierarchical_params_gather", T::kBool, "false", "MiCS is not used"),
    opaque("zero_optimization.leaf_module", P::kNoEffect, kOwnSharding),
    refused("zero_optimization.zero_hpz_partition_size", T::kInt, "1",
            "ZeRO++ hierarchical partitioning is not supported: lf-train shards over every rank"),
    refused("zero_optimization.zero_quantized_weights", T::kBool, "false",
            "quantized all-gathers (ZeRO++) change the weights each rank computes with"),
    refused("zero_optimization.zero_quantized_nontrainable_weights", T::kBool, "false",
            "quantized frozen weights (ZeRO++) change the result"),
    refused("zero_optimization.zero_quantized_gradients", T::kBool, "false",
            "quantized gradient reduction (ZeRO++) changes the result"),
    opaque("zero_optimization.zeropp_loco_param", P::kRefused, "ZeRO++ LoCo (quantized communication) is not supported"),
    refused("zero_optimization.mics_shard_size", T::kInt, "-1", "MiCS sub-group sharding is not supported"),
    opaque("zero_optimization.zenflow", P::kRefused, "ZenFlow (stale CPU optimizer updates) changes the result"),

    // ---- everything else DeepSpeed reads
    no_effect("steps_per_print", T::kInt, "", "lf-train logs every logging_steps"),
    no_effect("wall_clock_breakdown", T::kBool, "false", "LF_PROFILE_PHASES=1 gives lf-train's breakdown"),
    no_effect("memory_breakdown", T::kBool, "false", "the perf: line reports peak memory"),
    no_effect("dump_state", T::kBool, "false", "DeepSpeed's diagnostics"),
    no_effect("prescale_gradients", T::kBool, "false", "the same average, divided at another point"),
    no_effect("gradient_predivide_factor", T::kNumber, "1.0", "the same average, divided at another point"),
    no_effect("sparse_gradients", T::kBool, "false", "lf-train sends an embedding's looked-up rows when fewer bytes"),
    no_effect("disable_allgather", T::kBool, "false", "an implementation choice of DeepSpeed's"),
    no_effect("graph_harvesting", T::kBool, "false", "an implementation choice of DeepSpeed's"),
    no_effect("vocabulary_size", T::kInt, "", "the vocabulary comes from the model's config.json"),
    no_effect("seq_parallel_comm_data_type", T::kString, "\"fp32\"", "no sequence parallelism"),
    no_effect("use_data_before_expert_parallelism", T::kBool, "false", "no expert parallelism"),
    refused("sequence_parallel_size", T::kInt, "1", "sequence parallelism is not supported"),
    refused("dataloader_drop_last", T::kBool, "false", "dropping the last batch is not supported"),
    section("data_types"),
    refused("data_types.grad_accum_dtype", T::kString, "", "lf-train accumulates gradients in fp32", "null|\"fp32\""),
    opaque("amp", P::kRefused, "Apex AMP is not supported: use bf16 or fp16"),
    opaque("torch_autocast", P::kRefused, "torch.autocast regions change the precision of the result: use bf16 or fp16"),
    opaque("sparse_attention", P::kRefused, "sparse attention changes the model"),
    opaque("progressive_layer_drop", P::kRefused, "progressive layer drop changes the model"),
    opaque("elasticity", P::kRefused, "elastic batch sizes change the global batch"),
    opaque("data_efficiency", P::kRefused, "DeepSpeed's data sampling and routing change what is trained"),
    opaque("curriculum_learning", P::kRefused, "curriculum learning changes what is trained"),
    opaque("compression_training", P::kRefused, "compression training changes the model"),
    opaque("quantize_training", P::kRefused, "quantized training changes the model"),
    opaque("weight_quantization", P::kRefused, "quantized weights change the model"),
    opaque("tensor_parallel", P::kRefused, "tensor parallelism is not supported (ZeRO shards over every rank)"),
    opaque("expert_parallel", P::kRefused,
           "DeepSpeed's MoE expert parallelism (its ep_size lives in the model code) is not read: lf-train's "
           "expert_model_parallel_size places the experts over the ranks"),
    opaque("hybrid_engine", P::kRefused, "the RLHF hybrid engine is not supported"),
    opaque("pipeline", P::kNoEffect, "no pipeline parallelism"),
    opaque("activation_checkpointing", P::kNoEffect,
           "DeepSpeed's checkpointing API is not used by HF models either; lf-train checkpoints by "
           "gradient_checkpointing"),
    opaque("flops_profiler", P::kNoEffect, "the perf: line reports tokens/s"),
    opaque("tensorboard", P::kNoEffect, kNoLogging),
    opaque("wandb", P::kNoEffect, kNoLogging),
    opaque("csv_monitor", P::kNoEffect, kNoLogging),
    opaque("comet", P::kNoEffect, kNoLogging),
    opaque("trackio", P::kNoEffect, kNoLogging),
    opaque("comms_logger", P::kNoEffect, "LF_PROFILE_TRACE traces every collective"),
    opaque("checkpoint", P::kNoEffect, "lf-train writes its own sealed checkpoints"),
    opaque("aio", P::kNoEffect, kNvmeOnly),
    opaque("nebula", P::kNoEffect, "lf-train writes its own sealed checkpoints"),
    opaque("autotuning", P::kNoEffect, "no autotuning runs"),
    opaque("eigenvalue", P::kNoEffect, "only used by progressive layer drop"),
    opaque("compile", P::kNoEffect, "an implementation choice of DeepSpeed's"),
    opaque("timers", P::kNoEffect, "DeepSpeed's diagnostics"),
    ignored("comms_config", "not a key DeepSpeed reads (LLaMA-Factory's example files carry it)"),
    ignored("monitor_config", "not a key DeepSpeed reads (LLaMA-Factory's example files carry it)"),
};

}  // namespace

std::span<const DsKey> deepspeed_keys() { return kKeys; }

const DsKey* find_deepspeed_key(std::string_view path) {
  auto it = std::find_if(std::begin(kKeys), std::end(kKeys), [&](const DsKey& k) { return k.path == path; });
  return it == std::end(kKeys) ? nullptr : &*it;
}

}  // namespace lf::config
