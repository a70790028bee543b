// lf-worker: the libtorch process the agent spawns: `train CONFIG.yaml [key=value ...]`
// (the trainer, src/train, when built) and the model entry points (bench-model,
// check-logits).
// Exit codes: lf/common/exit_codes.h (typed errors map through Error::exit_code()).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include <string>
#include <vector>

#include "lf/common/env.h"
#include "lf/common/error.h"
#include "lf/common/log.h"
#include "lf/worker/bench_model.h"
#include "lf/worker/check_logits.h"
#ifdef LF_WORKER_WITH_TRAIN
#include "lf/config/train_config.h"
#include "lf/train/run_training.h"
#endif

int main(int argc, char** argv) {
  CLI::App app{"lf-worker: lf-train's libtorch worker"};
  app.require_subcommand(1);

  lf::worker::BenchModelOptions bench;
  auto* b = app.add_subcommand("bench-model", "forward+backward(+AdamW) tokens/s on random weights");
  b->add_option("--model-config", bench.model_config, "config.json or model folder")->required();
  b->add_option("--mode", bench.mode, "lora | full");
  b->add_option("--seq", bench.seq);
  b->add_option("--mbs", bench.mbs);
  b->add_option("--steps", bench.steps);
  b->add_option("--warmup", bench.warmup);
  b->add_option("--param-dtype", bench.param_dtype, "bf16 | fp32 (default: fp32 full, bf16 lora base)");
  b->add_option("--compute-dtype", bench.compute_dtype, "bf16 | fp32");
  b->add_option("--optimizer", bench.optimizer, "adamw | none");
  b->add_option("--lora-rank", bench.lora_rank);
  b->add_option("--lora-alpha", bench.lora_alpha);
  b->add_option("--lora-target", bench.lora_target, "all, or names: q_proj,k_proj,v_proj,o_proj");
  b->add_option("--device", bench.device, "auto | cuda | cpu");
  b->add_flag("--verbose", bench.verbose, "per-step loss and time on stderr");
  b->add_flag("--fused-loss", bench.fused_loss, "chunked fused LM head + cross-entropy");
  b->add_flag("--ckpt", bench.gradient_checkpointing, "activation checkpointing per decoder layer");

  lf::worker::CheckLogitsOptions check;
  auto* c = app.add_subcommand("check-logits", "write random weights + our logits for the transformers check");
  c->add_option("--model-config", check.model_config)->required();
  c->add_option("--out", check.out_dir)->required();
  c->add_option("--batch", check.batch);
  c->add_option("--seq", check.seq);
  c->add_option("--seed", check.seed);
  c->add_option("--device", check.device);

#ifdef LF_WORKER_WITH_TRAIN
  std::string train_config;
  auto* t = app.add_subcommand("train", "train as LLaMA-Factory would (run by the agent: lf-train CONFIG.yaml)");
  t->add_option("config", train_config, "LLaMA-Factory YAML")->required();
  t->allow_extras();  // key=value overrides
#endif

  CLI11_PARSE(app, argc, argv);
#ifdef LF_WORKER_WITH_TRAIN
  if (t->parsed()) {
    lf::init_logging("worker r" + lf::env_string("RANK").value_or("0"));
    try {
      return lf::train::run_training(lf::config::load_train_config(train_config, t->remaining()));
    } catch (const lf::Error& e) {  // config errors before run_training maps its own
      spdlog::error("{}", e.what());
      return e.exit_code();
    }
  }
#endif
  try {
    if (b->parsed()) std::printf("RESULT %s\n", lf::worker::run_bench_model(bench).c_str());
    if (c->parsed()) std::printf("CHECK_LOGITS %s\n", lf::worker::run_check_logits(check).c_str());
    std::fflush(stdout);
  } catch (const lf::Error& e) {
    std::fprintf(stderr, "lf-worker: error: %s\n", e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lf-worker: internal error: %s\n", e.what());
    return lf::kExitInternal;
  }
  return lf::kExitOk;
}
