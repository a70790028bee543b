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
     "nothing; unset: no token"},
    {"LF_WORKER_BIN", KnobType::kPath, "", "", "lf-train",
     "the lf-worker executable `lf-train CONFIG.yaml` runs; unset: lf-worker beside lf-train, else "
     "../worker/lf-worker (a build tree)"},

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

    // ---- worker liveness and progress deadlines (the agent watches the heartbeats)
    {"LF_WORKER_LIVENESS_TIMEOUT_S", KnobType::kSeconds, "30", "", "lf-train",
     "a worker that heartbeated and then sends nothing (its liveness thread beats every second) for this long is "
     "hung or stopped: the job stops on every node, the worker named; 0: off (--worker-heartbeat-timeout wins)"},
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
    {"LF_FUSED_KERNELS", KnobType::kString, "1", "", "lf-worker",
     "1: the fused CUDA kernels (RMSNorm with the residual add, RoPE, SwiGLU) where the build has them; 0: the "
     "ATen ops (for comparison)"},
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
     "FIRST:LAST, the optimizer steps LF_PROFILE_TRACE records (1 <= FIRST <= LAST)"},
};

}  // namespace lf
