#pragma once
// THE list of lf-train's own environment knobs: every `LF_*` variable that lf-train,
// its agent or lf-worker reads (or sets for a worker) is one row here, with its
// type, default and meaning, as NCCL declares NCCL_PARAM. Reads go through the
// accessors of lf/common/env_knobs.h, which refuse, at compile time, a name that
// is not in this table. `lf-train env` prints it; the README's section on
// environment knobs is generated from it (scripts/gen_readme.py; a ctest fails
// when the README is stale).
//
// To add a knob: add a row (keep them grouped by who reads them), then run
// scripts/gen_readme.py. Included by env_knobs.h only.
#include <string_view>

namespace lf {

enum class KnobType {
  kString,   // any text
  kPath,     // a file or folder
  kInt,      // a decimal integer
  kSeconds,  // a non-negative number of seconds (fractions allowed)
  kNumber,   // a decimal number
  kBool,     // 0 or 1
  kChoice,   // one of `choices` ("a|b|c")
};

struct EnvKnob {
  std::string_view name;
  KnobType type;
  // What an unset (or empty) variable means, as the variable would spell it; empty:
  // no default (unset means off / not under lf-train; `meaning` says which).
  std::string_view default_value;
  std::string_view choices;  // kChoice: "a|b|c"
  std::string_view read_by;  // who reads it: "lf-train", "lf-worker", "every process", "workers (set by the agent)"
  std::string_view meaning;
};

inline constexpr EnvKnob kEnvKnobs[] = {
    // ---- every process
    {"LF_LOG_LEVEL", KnobType::kChoice, "info", "trace|debug|info|warn|warning|error|err|critical|off", "every process",
     "log level of lf-train, its agent and lf-worker"},

    // ---- the user sets these for lf-train
    {"LF_JOB_TOKEN", KnobType::kString, "", "", "lf-train, lf-worker",
     "shared secret of the job: a node (or a worker's store client) with another token is refused and learns "
     "nothing; unset: no token (lf-train --hostfile makes one for the job; `lf-train doctor` warns about a multi-node "
     "job on a non-loopback address without one)"},
    {"LF_JOB_TOKEN_FILE", KnobType::kPath, "", "", "lf-train, lf-worker",
     "a file whose content (surrounding whitespace dropped) is the job's token, e.g. a mounted Kubernetes Secret; "
     "the token stays out of the environment and of `ps`; LF_JOB_TOKEN set too must be the same token"},
    {"LF_OUTPUT_LOCK_STALE_S", KnobType::kSeconds, "60", "", "lf-train",
     "node 0 renews the job's output_dir lock (output_dir/.lf-train.lock) every sixth of this; a lock of another host "
     "not renewed for this long is a dead job's and is taken over (on the same host: as soon as its pid is gone)"},
    {"LF_OUTPUT_LOCK_HELD", KnobType::kString, "", "", "lf-train (set by lf-train)",
     "set by the --retries supervisor for its attempts: the nonce of the output_dir lock it holds for them"},
    {"LF_SSH_ARGS", KnobType::kString, "", "", "lf-train",
     "--hostfile: extra arguments for every ssh, split on spaces (e.g. `-F ssh_config -i KEY -p 2222`); ssh always "
     "gets -o BatchMode=yes; never forwarded to the hosts"},
    {"LF_WORKER_BIN", KnobType::kPath, "", "", "lf-train",
     "the lf-worker executable `lf-train CONFIG.yaml` runs; unset: lf-worker beside lf-train, else "
     "../worker/lf-worker (a build tree)"},

    // ---- lf-train's agent: the metrics endpoint and health warnings (README "Watching a running job")
    {"LF_METRICS_PORT", KnobType::kInt, "", "", "lf-train",
     "serve Prometheus metrics on this TCP port on every node (0: a free port, printed in the log); unset: no "
     "endpoint (--metrics-port wins)"},
    {"LF_METRICS_ADDR", KnobType::kString, "127.0.0.1", "", "lf-train",
     "the IP address the metrics endpoint binds: this host only by default; the node's own address (or 0.0.0.0, "
     "every address) for a Prometheus on another host (--metrics-addr wins)"},
    {"LF_METRICS_GPU_INTERVAL_S", KnobType::kSeconds, "1", "", "lf-train",
     "seconds between NVML samples of the GPUs (> 0)"},
    {"LF_METRICS_LINGER_S", KnobType::kSeconds, "60", "", "lf-train",
     "after the job ends, serve its final values until the scraper's next visit (it sees the last step and phase "
     "done), at most this long; not at all when nothing scraped during the job; 0: leave at once"},
    // ---- lf-train's agent: node 0's live page of the job (docs/monitoring.md "The live page")
    {"LF_UI_PORT", KnobType::kInt, "", "", "lf-train",
     "node 0 serves the job's live page on this TCP port (0: a free port, printed in the log); unset: no page "
     "(--ui-port wins)"},
    {"LF_UI_ADDR", KnobType::kString, "127.0.0.1", "", "lf-train",
     "the IP address the live page binds: this host only by default; another (or 0.0.0.0) serves it beyond this "
     "host, and then only with its token (--ui-addr wins)"},
    {"LF_UI_TOKEN", KnobType::kString, "", "", "lf-train",
     "the live page's token (?token= or Authorization: Bearer), which its data then requires; bound beyond "
     "loopback the page always needs one: unset, one is made and printed in the page's URL"},
    {"LF_UI_LINGER_S", KnobType::kSeconds, "60", "", "lf-train",
     "after the job ends, node 0 serves the page until an open page polled the end once more, at most this long; "
     "not at all when no page polled during the job; 0: leave at once"},
    {"LF_UI_STATUS_INTERVAL_S", KnobType::kSeconds, "1", "", "lf-train",
     "with the live page on: seconds between each node's status messages to node 0 (ranks, GPUs, lines; > 0)"},
    {"LF_NVML_LIBRARY", KnobType::kPath, "libnvidia-ml.so.1", "", "lf-train",
     "the NVML library the metrics endpoint and `lf-train doctor` load at run time (absent: no GPU series, one "
     "info line)"},
    {"LF_CUDA_LIBRARY", KnobType::kPath, "libcuda.so.1", "", "lf-train",
     "the CUDA driver library `lf-train doctor` loads for the driver's CUDA version and device count"},
    {"LF_NCCL_LIBRARY", KnobType::kPath, "libnccl.so.2", "", "lf-train",
     "the NCCL library `lf-train doctor` loads for its version (point it at the one lf-worker uses)"},
    {"LF_HEALTH", KnobType::kBool, "1", "", "lf-train", "0: no health warnings in the log (the metrics stay)"},
    {"LF_HEALTH_GPU_TEMP_C", KnobType::kNumber, "85", "", "lf-train",
     "health warning: a GPU hotter than this many degrees Celsius for LF_HEALTH_GPU_TEMP_FOR_S"},
    {"LF_HEALTH_GPU_TEMP_FOR_S", KnobType::kSeconds, "60", "", "lf-train",
     "how long a GPU stays above LF_HEALTH_GPU_TEMP_C before the warning"},
    {"LF_HEALTH_GPU_MEM_GROWTH", KnobType::kNumber, "0.3", "", "lf-train",
     "health warning: a GPU's used memory grew by more than this fraction within LF_HEALTH_GPU_MEM_WINDOW_S"},
    {"LF_HEALTH_GPU_MEM_WINDOW_S", KnobType::kSeconds, "300", "", "lf-train", "the window of the memory-growth rule"},
    {"LF_HEALTH_GPU_MEM_MIN_BYTES", KnobType::kNumber, "1073741824", "", "lf-train",
     "the memory-growth rule ignores GPUs using less than this many bytes at the window's start"},
    {"LF_HEALTH_STRAGGLER_FACTOR", KnobType::kNumber, "2", "", "lf-train",
     "health warning: a rank whose median busy time per step is this many times the median of the node's other "
     "ranks (a straggler, named)"},
    {"LF_HEALTH_HEARTBEAT_GAP_S", KnobType::kSeconds, "10", "", "lf-train",
     "health warning: a worker that sent no heartbeat for this long"},
    {"LF_HEALTH_MASTER_GAP_S", KnobType::kSeconds, "2", "", "lf-train",
     "health warning: the rendezvous server silent for this long (its heartbeats come every 0.5 s)"},
    {"LF_HEALTH_REPEAT_S", KnobType::kSeconds, "300", "", "lf-train",
     "a health condition that lasts is logged again every this many seconds"},

    // ---- set by the agent for each worker (read by lf-worker and any program under `lf-train launch`)
    {"LF_RDZV_ADDR", KnobType::kString, "", "", "workers (set by the agent)",
     "address of the job's key-value store (the rendezvous server on node 0), for "
     "lf::rdzv::StoreClient::from_env(); unset: not run by lf-train"},
    {"LF_RDZV_PORT", KnobType::kInt, "", "", "workers (set by the agent)",
     "port of the job's key-value store; its presence tells lf-worker that it runs under lf-train"},
    {"LF_HEARTBEAT_FD", KnobType::kInt, "", "", "workers (set by the agent)",
     "file descriptor of the worker's heartbeat socket to its agent: write a line to it to heartbeat; unset: no "
     "agent listens"},
    {"LF_NODE_RANK", KnobType::kInt, "", "", "workers (set by the agent)", "the rank of the worker's node (GROUP_RANK)"},
    {"LF_NODE_SCRATCH", KnobType::kPath, "", "", "workers (set by the agent)",
     "a folder of the node's agent (under TMPDIR, unique to it) for what the node's workers share: the tokenized "
     "dataset when tokenized_path is unset; the agent removes it when it exits, however the job ended"},
    {"LF_BASE_WORLD_SIZE", KnobType::kInt, "", "", "workers (set by the agent)",
     "--nnodes MIN:MAX jobs only: the world size of the job's first round; lf-worker keeps that round's global batch "
     "on a restart with fewer or more ranks (gradient_accumulation_steps raised or lowered), or exits 2 when it "
     "cannot; unset: a fixed-size job"},

    // ---- worker liveness and progress deadlines (the agent watches the heartbeats)
    {"LF_WORKER_LIVENESS_TIMEOUT_S", KnobType::kSeconds, "10", "", "lf-train",
     "a worker that heartbeated and then sends nothing (its liveness thread beats every second) for this long is "
     "hung or stopped: the job stops on every node, the worker named; 0: off (--worker-heartbeat-timeout wins)"},
    {"LF_PEAK_TFLOPS", KnobType::kNumber, "", "", "lf-worker",
     "the device's dense peak TFLOP/s that lf_train_mfu divides by; unset: the data-sheet bf16/fp16 peak of a known "
     "GPU (H100/H200/H800/GH200 989.4, B200 2250, A100 312, L40S 362.1, A10G 70), else no lf_train_mfu"},
    {"LF_PROGRESS_DEADLINES", KnobType::kBool, "1", "", "lf-worker",
     "1: lf-worker's progress beats carry deadlines (a step, a load, a save that overruns its deadline is a hang); "
     "0: liveness only"},
    {"LF_PROGRESS_STEP_FACTOR", KnobType::kNumber, "10", "", "lf-worker",
     "the deadline of a training step is this many times the median step time so far (but at least "
     "LF_PROGRESS_STEP_FLOOR_S)"},
    {"LF_PROGRESS_STEP_FLOOR_S", KnobType::kSeconds, "120", "", "lf-worker",
     "the shortest deadline a training step gets"},
    {"LF_PROGRESS_FIRST_STEP_TIMEOUT_S", KnobType::kSeconds, "600", "", "lf-worker",
     "the deadline of a run's first step (warm-up, first collectives; at least the floor)"},
    {"LF_PROGRESS_LOAD_TIMEOUT_S", KnobType::kSeconds, "1800", "", "lf-worker",
     "deadline of the loading phase (config, resume agreement, model, communicator, checkpoint): a 7B load takes "
     "minutes"},
    {"LF_PROGRESS_TOKENIZE_TIMEOUT_S", KnobType::kSeconds, "3600", "", "lf-worker",
     "deadline of tokenizing the dataset"},
    {"LF_PROGRESS_EVAL_TIMEOUT_S", KnobType::kSeconds, "1800", "", "lf-worker",
     "deadline of an evaluation (and the step after it)"},
    {"LF_PROGRESS_SAVE_TIMEOUT_S", KnobType::kSeconds, "1800", "", "lf-worker",
     "deadline of a checkpoint or final save (and the step after it); 0 in any LF_PROGRESS_*_S: no deadline"},
    {"LF_CONFIG_CHECKED", KnobType::kBool, "", "", "lf-worker (set by lf-train)",
     "1: lf-train already printed the config's warnings and notes for this node; the workers leave them out"},
    {"LF_FAULT_SLEEP", KnobType::kString, "", "", "lf-worker",
     "tests and diagnosis only: PHASE:SECONDS[@RANK][,...] sleeps once in that phase after its beat (a slow load "
     "or save must not be taken for a hang)"},

    // ---- lf-worker: data-parallel diagnosis and tuning
    {"LF_FAULT_CKPT_EXIT_RANK", KnobType::kInt, "", "", "lf-worker",
     "tests only: this rank exits (code 3) at its first checkpoint save with its files durable but not yet reported "
     "to rank 0 (the per-rank commit must then leave no checkpoint)"},
    {"LF_HOST_ADAM_THREADS", KnobType::kInt, "", "", "lf-worker",
     "offload: the host AdamW's threads per worker (default: the CPUs the worker may run on / LOCAL_WORLD_SIZE)"},
    {"LF_HOST_ADAM_ISA", KnobType::kString, "", "", "lf-worker",
     "offload: force the host AdamW's vector path, avx512, avx2 or scalar (default: the best this CPU runs)"},
    {"LF_OFFLOAD_COPY_STREAMS", KnobType::kBool, "1", "", "lf-worker",
     "offload on a GPU: 1: gradients go down and updated shards come up on copy streams of their own, overlapping "
     "compute; 0: queued on the compute stream (for comparison)"},
    {"LF_OFFLOAD_DEVICE_NORM", KnobType::kBool, "1", "", "lf-worker",
     "offload: 1: max_grad_norm's norm summed on the device as each unit's gradient goes down (steps of one "
     "micro-step); 0: a pass over the gradients in host memory (for comparison)"},
    {"LF_FUSED_KERNELS", KnobType::kString, "1", "", "lf-worker",
     "1: the fused CUDA kernels (RMSNorm with the residual add, RoPE, SwiGLU) where the build has them; 0: the "
     "ATen ops (for comparison)"},
    {"LF_FUSED_CE", KnobType::kBool, "1", "", "lf-worker",
     "1: the LM head's cross-entropy and its gradient in one fused CUDA kernel per chunk (with LF_FUSED_KERNELS=1); "
     "0: the ATen ops (for comparison)"},
    {"LF_CUDA_GRAPHS", KnobType::kBool, "1", "", "lf-worker",
     "1: at world size 1 on a GPU, each step's first micro-step (forward, loss, backward) is captured once as a CUDA "
     "graph and replayed (no dropout; other batch shapes and accumulation micro-steps run eagerly); 0: eager "
     "(for comparison)"},
    {"LF_CUDA_GRAPH_BUCKET", KnobType::kInt, "128", "", "lf-worker",
     "with CUDA graphs on, unpacked rows are padded to a multiple of this many tokens (a multiple of 8), so that a "
     "run has few batch shapes and each gets its graph (cutoff_len 2048: 16)"},
    {"LF_VARLEN_ATTENTION", KnobType::kBool, "1", "", "lf-worker",
     "1: neat_packing on a GPU runs flash attention over each packed sequence (variable lengths, no mask); 0: "
     "SDPA under the block-diagonal mask, as on the CPU (for comparison)"},
    {"LF_GROUPED_MM", KnobType::kBool, "1", "", "lf-worker",
     "1: a mixture-of-experts layer on a GPU runs its experts' projections as ATen's grouped GEMMs (bf16, "
     "torch._grouped_mm: one launch for every expert, no host sync); 0: one GEMM per expert, as on the CPU (for "
     "comparison)"},
    {"LF_LEAN_RECOMPUTE", KnobType::kBool, "1", "", "lf-worker",
     "1: activation checkpointing's recompute leaves out each layer's down_proj GEMM (backward reads its input, "
     "not its output); 0: the whole layer again, as torch.utils.checkpoint (for comparison)"},
    {"LF_FUSED_LORA", KnobType::kBool, "1", "", "lf-worker",
     "1: with the fused kernels, a LoRA projection without dropout is one autograd node whose backward adds the "
     "adapter's input gradient into the base one's inside the GEMM; 0: ATen's ops, autograd adding them (for "
     "comparison)"},
    {"LF_FP8_EMULATE", KnobType::kBool, "0", "", "lf-worker",
     "tests only: 1 lets `fp8: true` run on the CPU, computing FP8's numbers with torch's CPU _scaled_mm (the "
     "same casts and calls as the GPU; slow), instead of the refusal; the plumbing's CI test (tests/train/test_fp8.py)"},
    {"LF_FP8_SCALES_IN_GEMM", KnobType::kChoice, "auto", "auto|0", "lf-worker",
     "fp8_recipe rowwise on a GPU: auto hands the input- and weight-gradient GEMMs their row scales (one cuBLASLt "
     "GEMM) where that writes torchao's bits, sm_90 with CUDA 12.9+; elsewhere, and with 0, torchao's unit-scaled "
     "GEMM and then a pass scaling its output (for comparison)"},
    {"LF_QUANT_GEMM", KnobType::kChoice, "auto", "auto|dequant|fused", "lf-worker",
     "QLoRA's 4-bit linear layers on a GPU: dequant (the weight dequantized into a reused buffer, then cuBLAS), "
     "fused (the forward's GEMM reads the 4 bits itself, 8 rows a launch: for few rows) or auto (fused for up to 8 "
     "rows, else dequant); the CPU dequantizes exactly, and fused there is an error"},
    {"LF_SDPA_BACKEND", KnobType::kChoice, "auto", "auto|torch|cudnn|flash|efficient|math", "lf-worker",
     "the attention kernel SDPA may pick (math stays its fallback for inputs the kernel refuses): cudnn, flash "
     "(FlashAttention-2), efficient (memory-efficient) or math; torch: torch's own order, which on a Hopper GPU "
     "picks cuDNN's, whose plans torch builds per new shape; auto: torch's order, without cuDNN when the rows' "
     "lengths vary from micro-batch to micro-batch (preference stages, unpacked rows not bucketed by CUDA graphs), "
     "which the worker's log says"},
    {"LF_PAD_MASKED_LOGITS", KnobType::kChoice, "auto", "auto|1|0", "lf-worker",
     "dpo/kto on padded batches: 1 runs the forward under HF's padding mask (the pad positions attend to their "
     "row's real tokens only, so TRL's logits/* metrics, which average the pad positions too, are LLaMA-Factory's; "
     "SDPA with a mask instead of flash attention), 0 causal attention over the row (the same losses, gradients and "
     "log-probabilities; logits/* differ on padded rows); auto: 1 off a GPU, 0 on one (flash attention's speed). "
     "pure_bf16 (sft/pt) where it is 1: HF's bf16 rounding bit for bit (padded rows under HF's mask with repeated kv "
     "heads, the LM head unchunked as ForCausalLMLoss: [B,T,V] logits, HF's memory); 0: flash attention's GQA and "
     "the chunked head, whose bf16 gradients differ from HF's by an ulp here and there"},
    {"LF_PREF_PADDING_FREE", KnobType::kChoice, "auto", "auto|1|0", "lf-worker",
     "dpo/kto/orpo/simpo forwards of padded rows (chosen and rejected responses of different lengths): 1 runs a "
     "micro-batch's rows as one row of their real tokens end to end, attention within each (TRL's padding_free: "
     "no GEMM or attention on pad positions; the same log-probabilities, losses and gradients up to rounding; "
     "logits/* cover the real positions only: dpo's average them, kto's per-example sums drop the pad "
     "positions), 0 pads them; auto: 1 where flash's varlen kernel runs (a GPU) and "
     "LF_PAD_MASKED_LOGITS is not 1. 1 with LF_PAD_MASKED_LOGITS=1 is an error"},
    {"LF_FP32_WEIGHT_GRADS", KnobType::kBool, "1", "", "lf-worker",
     "1: with the fused kernels, full fine-tuning's fp32 master weights get their gradients from a GEMM that "
     "writes fp32 (no bf16 gradient, no cast pass); 0: a bf16 gradient cast to fp32, as under autocast (for "
     "comparison)"},
    {"LF_LATE_READBACK", KnobType::kBool, "1", "", "lf-worker",
     "1: a step's loss, gradient norm and metrics are read on the host once the next step is launched (one "
     "process, bf16/fp32 with the fused clip; the step's log line and heartbeat follow one step later), so the GPU "
     "does not wait at each step's end while the host logs and prepares the next batch; steps that evaluate, save "
     "or end an epoch are read at once; 0: every step read at its end (the perf line says which)"},
    {"LF_FUSED_CLIP", KnobType::kBool, "1", "", "lf-worker",
     "1: on a GPU, max_grad_norm's clipping factor is applied inside the fused AdamW kernel (one pass over the "
     "gradients fewer); 0: a separate multiply first, as torch's clip_grad_norm_ (for comparison)"},
    {"LF_DDP_GRAD_SINK", KnobType::kBool, "1", "", "lf-worker",
     "1: under bf16/fp16 the layers' gradients go from the cast straight into the DDP buckets; 0: through fp32 "
     ".grad tensors (same bits, for comparison)"},
    {"LF_DDP_SPARSE_EMBEDDING", KnobType::kChoice, "auto", "auto|0|1", "lf-worker",
     "a trainable embedding's gradient travels as the rows each rank looked up: auto when those are fewer bytes "
     "than the dense gradient, 1 always, 0 never (dense; differs only in fp32 summation order)"},
    {"LF_NCCL_CTA_POLICY", KnobType::kChoice, "default", "default|efficiency|zero", "lf-worker",
     "NCCL's CTA policy for lf-worker's communicators (NCCL >= 2.27): efficiency (or zero) uses fewer SMs for "
     "the collectives, leaving more to backward; default: NCCL's own"},
    {"LF_COMM_CHECK", KnobType::kBool, "", "", "lf-worker",
     "1: before each collective every rank posts what it issues to the job's store and waits for the others, so "
     "a mismatch or a missing rank is named instead of hanging (slow: for debugging); unset: on when "
     "TORCH_DISTRIBUTED_DEBUG=DETAIL"},

    // ---- lf-worker: profiling
    {"LF_PROFILE_PHASES", KnobType::kBool, "0", "", "lf-worker",
     "1: the final perf: line adds the median seconds of forward, backward, ddp_finish and optimizer (synchronizes "
     "the device between phases: slower)"},
    {"LF_PROFILE_TRACE", KnobType::kPath, "", "", "lf-worker",
     "a folder: each rank writes a Kineto trace of the steps LF_PROFILE_TRACE_STEPS to DIR/trace-rank<R>.json; "
     "unset: no trace"},
    {"LF_PROFILE_TRACE_STEPS", KnobType::kString, "6:7", "", "lf-worker",
     "FIRST:LAST, the optimizer steps LF_PROFILE_TRACE records (0 <= FIRST <= LAST; 0 is the pass before step 1: "
     "dpo/kto's reference log-probabilities)"},
};

}  // namespace lf
