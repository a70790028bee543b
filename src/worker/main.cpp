// lf-worker: the libtorch process the agent spawns. For now the model entry points
// (bench-model, check-logits); the trainer (issue 5) adds `train`.
// Exit codes: lf/common/exit_codes.h (typed errors map through Error::exit_code()).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "lf/common/error.h"
#include "lf/worker/bench_model.h"
#include "lf/worker/check_logits.h"

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

  CLI11_PARSE(app, argc, argv);
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
