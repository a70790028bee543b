#pragma once
// `lf-worker bench-model`: forward + backward (+ optimizer step) throughput of one
// model shape on random weights and tokens, measured like ../shared/bench/hf_reference.py
// (median step time after warm-up; MFU with 6N (full) / 4N (LoRA) + 12·L·H·S FLOPs per
// token, N the parameters a token's forward uses: a mixture of experts' active ones), printed
// as one `RESULT {json}` line.
#include <cstdint>
#include <string>

namespace lf::worker {

struct BenchModelOptions {
  std::string model_config;      // config.json (configs/models/*.json) or a model folder
  std::string mode = "lora";     // lora | full
  int64_t seq = 2048;
  int64_t mbs = 4;
  int64_t steps = 12;
  int64_t warmup = 3;
  std::string param_dtype;       // default: fp32 for full (master weights), bf16 base for lora
  std::string compute_dtype = "bf16";
  std::string optimizer = "adamw";  // adamw (fused) | none
  int64_t lora_rank = 16;
  double lora_alpha = 32;
  std::string lora_target = "all";  // comma-separated (hf_reference.py adapts q,k,v,o on MoE shapes)
  std::string device = "auto";
  bool fused_loss = false;              // chunked head + CE (fused_loss.h)
  bool gradient_checkpointing = false;  // per decoder layer (hf_reference.py --ckpt)
  bool verbose = false;          // per-step loss and time on stderr
  double peak_tflops = 790;      // the measured bf16 GEMM ceiling of an H200 (shared/bench)
};

// Returns the RESULT line's JSON.
std::string run_bench_model(const BenchModelOptions& options);

}  // namespace lf::worker
