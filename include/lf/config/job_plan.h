#pragma once
// The job plan: everything a run does, resolved once on every node from the YAML, its
// `key=value` overrides, the DeepSpeed / FSDP files it names and the LF_* knobs, into one
// typed value with a section per component (torchtitan's Trainer.Config). Each component
// takes its section and nothing else; no component reads the environment or re-checks a
// rule. Every key of the config schema (src/config/config_schema.cpp) binds to exactly one
// field here; a knob binds in src/config/plan_knobs.cpp. Built by load_train_config
// (train_config.h), validated there once, then passed down by const reference.
//
// Fields marked "derived" are filled from other sections by the builder (so the data
// pipeline can take its section alone); nothing else writes them.
// Torch-free: lf-train (launcher, doctor, `lf-train plan`) and lf-worker share it.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lf/data/data_args.h"
#include "lf/optim/optimizer_options.h"

namespace lf::config {

// Which implementation each layer runs (the LF_* kernel knobs, read once by the builder:
// model code reads no environment). Each has one observable: the trace or `plan` says which
// path ran; the numbers agree within the path's tolerance.
struct KernelPaths {
  bool fused_kernels = true;       // LF_FUSED_KERNELS: the fused CUDA kernels where the build has them
  bool lean_recompute = true;      // LF_LEAN_RECOMPUTE
  bool fused_lora = true;          // LF_FUSED_LORA
  bool fp32_weight_grads = true;   // LF_FP32_WEIGHT_GRADS
  bool fused_ce = true;            // LF_FUSED_CE
  bool varlen_attention = true;    // LF_VARLEN_ATTENTION
  bool grouped_mm = true;          // LF_GROUPED_MM: MoE experts through ATen's grouped GEMM on a GPU
  bool cuda_graphs = true;         // LF_CUDA_GRAPHS
  int64_t cuda_graph_bucket = 128; // LF_CUDA_GRAPH_BUCKET
  std::string quant_gemm = "auto";  // LF_QUANT_GEMM: auto | dequant | fused (model/bnb4_linear.cpp)
  // LF_PAD_MASKED_LOGITS: auto | 1 | 0: preference forwards of padded rows under HF's padding mask
  // (model/key_padding.h; TRL's logits/* average the pad positions too); auto: off a GPU only.
  std::string pad_masked_logits = "auto";
  // LF_PREF_PADDING_FREE: auto | 1 | 0: preference forwards of padded rows run as one row of their real tokens
  // (train/padding_free.h); auto: where flash's varlen kernel runs and pad_masked_logits is off.
  std::string pref_padding_free = "auto";
  // LF_SDPA_BACKEND: auto | torch | cudnn | flash | efficient | math: the one fused attention kernel SDPA may
  // pick (math stays as its fallback); torch: torch's own order; auto: the same without cuDNN when the rows'
  // lengths vary (model/sdpa.h, train/attention_shapes.h).
  std::string sdpa_backend = "auto";
  // LF_FP8_SCALES_IN_GEMM: auto | 0: rowwise FP8's gradient GEMMs take their row scales where that is torchao's
  // arithmetic bit for bit (train/fp8_device.h); 0: torchao's unit-scaled GEMM and output multiply everywhere.
  std::string fp8_scales_in_gemm = "auto";
};

struct ModelSection {
  std::string model_name_or_path;
  // auto (the folder's weights; random when it holds none) | pretrained | random
  // (lf/model/initial_weights.h).
  std::string init_weights = "auto";
  // LLaMA-Factory checkpoints every decoder layer unless disable_gradient_checkpointing: true.
  bool gradient_checkpointing = true;
  // Mixture-of-experts models: the load-balancing loss's weight in the training loss (LLaMA-Factory
  // sets output_router_logits and router_aux_loss_coef from it). Unset or 0: the config.json's
  // router_aux_loss_coef when it says output_router_logits, else none (transformers).
  std::optional<double> moe_aux_loss_coef;
  // LLaMA-Factory's use_reentrant_gc (default true): under activation checkpointing transformers then
  // records the routers' logits in the checkpoint's no-grad forward, and the load-balancing loss adds
  // to the logged loss but no gradient; false: it trains the routers. No effect on a dense model.
  bool use_reentrant_gc = true;
  KernelPaths kernels;
};

// What trains: the whole model, LoRA adapters, or the last layers (freeze).
struct AdapterSection {
  std::string finetuning_type = "lora";  // lora | oft | full | freeze
  // freeze (LLaMA-Factory's _setup_freeze_tuning, model/freeze.h):
  int64_t freeze_trainable_layers = 2;  // the last N layers (N < 0: the first -N)
  std::vector<std::string> freeze_trainable_modules = {"all"};
  std::vector<std::string> freeze_extra_modules;
  bool use_llama_pro = false;
  // LoRA: PiSSA's initialisation (model/pissa.h), pissa_iter < 0 the full SVD; pissa_convert writes
  // pissa_init/, pissa_backup/ and pissa_converted/ beside the adapter (train/pissa_outputs.h).
  bool pissa_init = false;
  int64_t pissa_iter = 16;
  bool pissa_convert = false;  // freeze: the blocks LLaMA Pro's expansion inserted train (model/freeze.h)
  // LoRA: adapters merged into the base in turn, the last one trained on unless
  // create_new_adapter (then a new adapter on top of them all), as LLaMA-Factory does.
  std::vector<std::string> adapter_name_or_path;
  bool create_new_adapter = false;
  int64_t lora_rank = 8;
  double lora_alpha = 0;  // 0 in the YAML means unset: resolved to 2 x lora_rank
  double lora_dropout = 0;
  std::vector<std::string> lora_target = {"all"};
  std::vector<std::string> additional_target;  // peft's modules_to_save: trained fully beside LoRA
  bool use_rslora = false;  // scaling lora_alpha / sqrt(lora_rank)
  bool use_dora = false;    // DoRA: magnitude + direction (model/dora.h)
  // OFT (finetuning_type oft, model/oft.h): peft's OFTConfig r / oft_block_size, exactly one non-zero; it targets
  // lora_target and trains additional_target beside, as LLaMA-Factory passes them.
  int64_t oft_rank = 0;
  int64_t oft_block_size = 32;

  bool lora() const { return finetuning_type == "lora"; }
  bool oft() const { return finetuning_type == "oft"; }
  bool peft() const { return lora() || oft(); }  // a peft adapter trains, the base is frozen
  bool full() const { return finetuning_type == "full"; }
  bool freeze() const { return finetuning_type == "freeze"; }
};

// How a batch becomes a loss (DESIGN "Objective per stage"; src/train/objective.h). The preference
// keys are LLaMA-Factory's RLHFArguments, with its defaults.
struct ObjectiveSection {
  std::string stage = "sft";  // sft | pt | dpo | kto | rm
  double pref_beta = 0.1;             // dpo, kto: the beta of the preference loss
  double pref_ftx = 0;                // dpo, kto: the SFT term's coefficient
  std::string pref_loss = "sigmoid";  // dpo: sigmoid | hinge | ipo | orpo | simpo
  double dpo_label_smoothing = 0;     // dpo sigmoid: cDPO's label smoothing
  double simpo_gamma = 0.5;           // dpo simpo: the target reward margin
  double kto_chosen_weight = 1;       // kto: the desirable examples' loss weight
  double kto_rejected_weight = 1;     // kto: the undesirable examples' loss weight
  double pref_bco_weight = 0;         // dpo with a reference: BCO's term, baseline TRL's RunningMoments
  std::optional<double> ld_alpha;     // dpo: LD-DPO's weight of the response tokens past the shorter one
  // dpo, kto: the reference model, when not the policy's start (LLaMA-Factory's create_ref_model):
  // loaded frozen in the compute dtype, its adapters merged, quantized to 4 bits when asked.
  std::string ref_model;
  std::vector<std::string> ref_model_adapters;
  std::optional<int64_t> ref_model_quantization_bit;
  // sft's token-weighted cross-entropies (LLaMA-Factory's, token_weighted_objective.cpp): DFT weighs each
  // target token by its probability, EAFT by (its top-20 entropy / 3) ^ eaft_alpha.
  bool use_dft_loss = false;
  bool use_eaft_loss = false;
  double eaft_alpha = 1.0;
  // ASFT (asft_objective.cpp): DFT's term + asft_alpha x KL(the initial model's softmax || the policy's), each a
  // mean over the micro-batch's target tokens, as LLaMA-Factory's asft_loss_func.
  bool use_asft_loss = false;
  double asft_alpha = 0.1;
  // Whether the loss compares with a reference model (LLaMA-Factory's use_ref_model).
  bool uses_reference() const {
    return stage == "kto" || (stage == "dpo" && pref_loss != "orpo" && pref_loss != "simpo");
  }
  bool preference() const { return stage == "dpo" || stage == "kto" || stage == "rm"; }
};

struct OptimSection {
  double learning_rate = 5e-5;
  double weight_decay = 0;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  double max_grad_norm = 1.0;     // 0: no clipping
  double loraplus_lr_ratio = 0;   // LoRA+: lora_B learns at learning_rate x this (0: off)
  bool fused_clip = true;         // LF_FUSED_CLIP: max_grad_norm's factor inside the fused AdamW
  optim::OptimizerOptions optimizer;  // which optimizer (registry: lf/optim/optimizer.h) and its keys
};

// How many steps, of what batch, at which learning rate.
struct ScheduleSection {
  int64_t per_device_train_batch_size = 8;
  int64_t gradient_accumulation_steps = 1;
  double num_train_epochs = 3;
  int64_t max_steps = -1;  // > 0 wins over num_train_epochs (HF)
  std::string lr_scheduler_type = "linear";  // linear | cosine | constant | constant_with_warmup
  double warmup_ratio = 0;
  double warmup_steps = 0;  // >= 1: steps, wins over warmup_ratio; in (0, 1): a ratio
};

struct PrecisionSection {
  bool bf16 = false;
  bool fp16 = false;  // with a dynamic loss scaler (torch's GradScaler)
  // LLaMA-Factory's pure_bf16: the model loaded in bf16 and trained as it is (trainable weights, their gradients
  // and the optimizer's moments bf16; no fp32 master copy, no autocast).
  bool pure_bf16 = false;
  // The master-weight question every trainable buffer asks (the loader's parameter dtype, hence the linear
  // layers' cast, the gradients' and the optimizer moments' dtype): an fp32 copy beside a lower compute dtype?
  bool fp32_master() const { return !pure_bf16; }
  bool bf16_compute() const { return bf16 || pure_bf16; }
  // QLoRA (LLaMA-Factory's quantization keys, src/config/quantization_keys.cpp): the frozen base's
  // decoder linear layers stored in 4 bits as bitsandbytes stores them (lf/quant/bnb_4bit.h),
  // dequantized into each GEMM (lf/model/linear_format.h).
  std::optional<int64_t> quantization_bit;  // unset: none; 4 (8 and the rest refused with the reason)
  std::string quantization_method = "bnb";  // on-the-fly quantization at load (others refused)
  std::string quantization_type = "nf4";    // nf4 | fp4
  bool double_quantization = true;          // the absmax values quantized again (8 bits, blocks of 256)
  bool quantized() const { return quantization_bit.has_value(); }
  // FP8 training (src/config/fp8_keys.cpp, lf/quant/fp8.h): the decoder linear layers' GEMMs in FP8 on
  // sm_89+ GPUs; refused elsewhere by the worker. LLaMA-Factory's fp8_backend has no effect (one backend here).
  bool fp8 = false;
  std::string fp8_recipe = "rowwise";    // tensorwise | rowwise (torchao's Float8LinearRecipeName)
};

struct EvalSection {
  std::string eval_strategy = "no";  // no | steps | epoch
  std::optional<double> eval_steps;  // unset: logging_steps (HF)
  int64_t per_device_eval_batch_size = 8;
};

// LLaMA-Factory's predict run (do_predict + predict_with_generate: src/train/predict_run.cpp) and the
// GeneratingArguments it generates with (LLaMA-Factory's defaults).
struct PredictSection {
  bool do_train = true;
  bool do_predict = false;
  bool predict_with_generate = false;
  bool do_sample = true;
  double temperature = 0.95;
  double top_p = 0.7;
  int64_t top_k = 50;
  int64_t max_new_tokens = 1024;
  double repetition_penalty = 1.0;
  bool skip_special_tokens = true;  // in generated_predictions.jsonl's predict and label
};

// Checkpoints and the files a run leaves in output_dir.
struct OutputSection {
  std::string output_dir = "trainer_output";
  bool overwrite_output_dir = false;
  std::string resume_from_checkpoint;
  std::string save_strategy = "steps";  // no | steps | epoch
  double save_steps = 500;
  std::optional<int64_t> save_total_limit;
  bool plot_loss = false;
};

struct LoggingSection {
  double logging_steps = 500;  // < 1: a fraction of total steps (HF)
  // HF's report_to, resolved: "tensorboard" writes output_dir/runs/; "all" means tensorboard
  // here; the other integrations have no effect (a line each). Empty: none.
  std::vector<std::string> report_to;
  // HF's include_num_input_tokens_seen: no | all | non_padding.
  std::string include_num_input_tokens_seen = "no";
  bool profile_phases = false;           // LF_PROFILE_PHASES
  std::string profile_trace;             // LF_PROFILE_TRACE: a folder ("" none)
  int64_t profile_trace_first = 6;       // LF_PROFILE_TRACE_STEPS FIRST:LAST
  int64_t profile_trace_last = 7;
  std::optional<double> peak_tflops;     // LF_PEAK_TFLOPS: the MFU's denominator (dense TFLOP/s)
  // LF_LATE_READBACK: a step's loss and gradient norm read on the host after the next step is launched
  // (train/step_readback.cpp), so the GPU never waits at a step's end for the host; 0: read at the step's end.
  bool late_readback = true;
};

// How the step is spread over ranks: DDP, or ZeRO with its buckets and offload.
struct ParallelSection {
  double ddp_bucket_cap_mb = 25;         // HF's key; unset (None) means 25 as in torch DDP
  std::string ddp_reduce_dtype = "fp32"; // fp32 | bf16: the dtype gradients travel in
  int64_t zero_stage = 0;                // 0: data parallel (DDP); 1, 2, 3: ZeRO stages
  std::string offload = "none";          // none | optimizer | params
  // The share of the trainable parameters offloaded (DeepSpeed's offload_optimizer.ratio).
  double offload_ratio = 1.0;
  // DeepSpeed's bucket sizes, in MiB of the dtype DeepSpeed would hold them in.
  bool overlap_comm = true;
  double reduce_bucket_mb = 25;     // reduce_bucket_size
  double allgather_bucket_mb = 25;  // allgather_bucket_size
  double prefetch_bucket_mb = 25;   // stage3_prefetch_bucket_size
  bool pin_memory = true;           // offloaded state in page-locked host memory
  // expert_model_parallel_size (LLaMA-Factory's Megatron key): each sparse layer's experts placed
  // over this many ranks, tokens dispatched by all-to-all (1: every rank holds every expert).
  int64_t expert_parallel_size = 1;
  // Where the stage came from, for messages ("deepspeed: ds_z3_config.json", "zero_stage: 2", "").
  std::string sharding_source;
  // DeepSpeed's explicit train_batch_size (checked against the world by check_world_size).
  std::optional<int64_t> train_batch_size;
  // Knobs (env_knob_table.h), read once by the builder:
  bool ddp_grad_sink = true;                 // LF_DDP_GRAD_SINK
  std::string ddp_sparse_embedding = "auto"; // LF_DDP_SPARSE_EMBEDDING: auto | 0 | 1
  bool offload_copy_streams = true;          // LF_OFFLOAD_COPY_STREAMS
  bool offload_device_norm = true;           // LF_OFFLOAD_DEVICE_NORM

  bool sharded() const { return zero_stage > 0; }
  bool offloaded() const { return offload != "none"; }
};

struct JobPlan {
  DataArgs data;  // the data pipeline's section (its seed, model path and stage: derived)
  ModelSection model;
  AdapterSection adapter;
  ObjectiveSection objective;
  OptimSection optim;
  ScheduleSection schedule;
  PrecisionSection precision;
  EvalSection eval;
  PredictSection predict;
  OutputSection output;
  LoggingSection logging;
  ParallelSection parallel;
  int64_t seed = 42;  // the example order, LoRA's init, random weights, every rank's dropout
};

// The examples one optimizer step takes over `world` ranks: per_device_train_batch_size x
// gradient_accumulation_steps x world (DESIGN "Order"). The one place this product is formed.
int64_t global_batch(const ScheduleSection& s, int64_t world);

}  // namespace lf::config
