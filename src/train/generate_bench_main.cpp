// lf-generate-bench: greedy generation throughput of lf/train/generation.h on random weights (a benchmark, not
// a test; scripts/device/generate_bench.sh runs it beside transformers' generate on the same shape):
//   lf-generate-bench CONFIG_JSON [--batch 32] [--prompt 128] [--new 256] [--dtype bf16|fp32] [--reps 3]
// Every row generates --new tokens (no stop token); prints `GEN_LF {json}` with the new tokens a second over
// the best of --reps timed runs after one warm-up.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "lf/common/error.h"
#include "lf/model/loader.h"
#include "lf/train/generation.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: lf-generate-bench CONFIG_JSON [--batch N] [--prompt N] [--new N] [--dtype bf16|fp32] [--reps N]\n");
    return 2;
  }
  int64_t batch = 32, prompt = 128, fresh = 256, reps = 3;
  std::string dtype = "bf16";
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--batch") batch = std::stoll(v);
    else if (k == "--prompt") prompt = std::stoll(v);
    else if (k == "--new") fresh = std::stoll(v);
    else if (k == "--reps") reps = std::stoll(v);
    else if (k == "--dtype") dtype = v;
  }
  try {
    lf::model::LoadOptions o;
    o.random_init = true;
    o.seed = 0;
    o.device = at::hasCUDA() ? c10::Device(c10::DeviceType::CUDA, 0) : c10::Device(c10::DeviceType::CPU);
    o.param_dtype = dtype == "bf16" ? at::kBFloat16 : at::kFloat;
    auto model = lf::model::load_causal_lm(argv[1], o);
    model->set_compute_dtype(o.param_dtype);
    auto gen = at::detail::createCPUGenerator(0);
    const auto ids = at::randint(1000, model->config().vocab_size, {batch, prompt}, gen, at::kLong);
    std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(batch));
    for (int64_t r = 0; r < batch; ++r)
      for (int64_t j = 0; j < prompt; ++j) prompts[static_cast<size_t>(r)].push_back(static_cast<int32_t>(ids[r][j].item<int64_t>()));
    lf::train::GenerationConfig c;
    c.do_sample = false;
    c.max_new_tokens = fresh;
    (void)lf::train::generate(*model, prompts, c);  // warm-up
    double best = 1e30;
    for (int64_t k = 0; k < reps; ++k) {
      // The previous generate ended copying its tokens to the host: nothing is still running on the device.
      const auto t0 = std::chrono::steady_clock::now();
      const auto out = lf::train::generate(*model, prompts, c);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::min(best, s);
      LF_CHECK(out[0].size() == static_cast<size_t>(fresh), lf::BackendError, "generated {} tokens, not {}", out[0].size(), fresh);
    }
    std::printf("GEN_LF {\"batch\": %ld, \"prompt\": %ld, \"new\": %ld, \"dtype\": \"%s\", \"seconds\": %.4f, \"tokens_per_s\": %.1f}\n",
                batch, prompt, fresh, dtype.c_str(), best, static_cast<double>(batch * fresh) / best);
    return 0;
  } catch (const lf::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return e.exit_code();
  }
}
