#include "lf/worker/bench_model.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cstdio>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "lf/common/error.h"
#include "lf/model/fused_loss.h"
#include "lf/model/loader.h"
#include "lf/model/lora.h"
#include "lf/model/loss.h"
#include "lf/model/sdpa.h"
#include "lf/model/tensor_io.h"
#include "lf/worker/device.h"

namespace lf::worker {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Fused AdamW over one dtype/device group (HF's defaults, lr as in hf_reference.py).
struct AdamW {
  std::vector<at::Tensor> params, exp_avg, exp_avg_sq, steps;
  explicit AdamW(std::vector<at::Tensor> p) : params(std::move(p)) {
    for (auto& t : params) {
      exp_avg.push_back(at::zeros_like(t));
      exp_avg_sq.push_back(at::zeros_like(t));
      steps.push_back(at::zeros({}, t.options().dtype(at::kFloat)));
    }
  }
  void step() {
    c10::NoGradGuard g;
    std::vector<at::Tensor> grads;
    for (auto& t : params) grads.push_back(t.grad());
    at::_foreach_add_(steps, 1);  // the kernel reads the step count; torch.optim increments it first too
    at::_fused_adamw_(params, grads, exp_avg, exp_avg_sq, {}, steps, 1e-5, 0.9, 0.999, 0.0, 1e-8, false, false);
  }
  void zero_grad() {
    for (auto& t : params) t.mutable_grad() = at::Tensor();
  }
};

// The model of the bench, randomly initialised, with what trains: LoRA adapters or every weight.
struct BenchModel {
  std::unique_ptr<model::CausalLM> m;
  std::vector<at::Tensor> trainable;
  c10::ScalarType param_dtype;
  double init_s = 0;
};

BenchModel load_bench_model(const BenchModelOptions& o, const c10::Device& device) {
  const bool lora = o.mode == "lora";
  model::LoadOptions lo;
  lo.random_init = true;
  lo.device = device;
  lo.param_dtype = model::scalar_type_from_name(o.param_dtype.empty() ? (lora ? "bf16" : "fp32") : o.param_dtype);
  const auto t0 = std::chrono::steady_clock::now();
  BenchModel b{model::load_causal_lm(o.model_config, lo), {}, lo.param_dtype};
  auto& m = *b.m;
  m.set_compute_dtype(model::scalar_type_from_name(o.compute_dtype));
  m.set_training(true);
  m.set_gradient_checkpointing(o.gradient_checkpointing);
  if (lora) {
    model::LoraConfig lc;
    lc.rank = o.lora_rank;
    lc.alpha = o.lora_alpha;
    lc.target = model::parse_lora_target(o.lora_target);
    model::apply_lora(m, lc);
    for (auto& p : model::lora_parameters(m)) b.trainable.push_back(*p.tensor);
  } else {
    for (auto& p : m.named_parameters()) {
      p.tensor->set_requires_grad(true);
      b.trainable.push_back(*p.tensor);
    }
  }
  device_synchronize(device);
  b.init_s = seconds_since(t0);
  return b;
}

// What SDPA picks for this shape in training (requires_grad, compute dtype).
std::string sdpa_backend_for(const model::CausalLM& m, const BenchModelOptions& o, const c10::Device& device) {
  const auto& cfg = m.config();
  return model::sdpa_backend_for(o.mbs, o.seq, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim,
                                 at::TensorOptions().dtype(m.compute_dtype()).device(device));
}

// The timed steps: seconds of each after the warm-up, and the last loss.
std::vector<double> timed_steps(BenchModel& b, AdamW* opt, const BenchModelOptions& o, const c10::Device& device,
                                double& loss_value) {
  auto& m = *b.m;
  auto gen = at::globalContext().defaultGenerator(device);
  gen.set_current_seed(0);
  const auto ids_opts = at::TensorOptions().dtype(at::kLong).device(device);
  std::vector<double> times;
  for (int64_t i = 0; i < o.warmup + o.steps; ++i) {
    auto ids = at::randint(0, m.config().vocab_size, {o.mbs, o.seq}, gen, ids_opts);
    device_synchronize(device);
    auto t = std::chrono::steady_clock::now();
    auto loss = o.fused_loss ? model::causal_lm_loss_fused(m, m.hidden_states(ids), ids)
                             : model::causal_lm_loss(m.forward(ids), ids);
    loss.backward();
    if (opt) {
      opt->step();
      opt->zero_grad();
    } else {
      for (auto& p : b.trainable) p.mutable_grad() = at::Tensor();
    }
    device_synchronize(device);
    if (i >= o.warmup) times.push_back(seconds_since(t));
    if (i + 1 == o.warmup + o.steps || o.verbose) loss_value = loss.item<double>();
    if (o.verbose) std::fprintf(stderr, "step %ld loss %.4f %.4fs\n", static_cast<long>(i), loss_value, seconds_since(t));
  }
  return times;
}

}  // namespace

std::string run_bench_model(const BenchModelOptions& o) {
  LF_CHECK(o.steps > 0, ConfigError, "--steps must be positive");
  LF_CHECK(o.mode == "lora" || o.mode == "full", ConfigError, "--mode must be lora or full, got '{}'", o.mode);
  LF_CHECK(o.optimizer == "adamw" || o.optimizer == "none", ConfigError, "--optimizer must be adamw or none");
  const auto device = pick_device(o.device);
  auto b = load_bench_model(o, device);
  const auto& m = *b.m;
  int64_t n_params = 0, n_train = 0;
  for (auto& p : b.m->named_parameters()) n_params += p.tensor->numel();
  // FLOPs count the parameters a token passes through (hf_reference.py's active_params).
  const double n_active = b.m->layout().active_params();
  for (auto& t : b.trainable) n_train += t.numel();
  std::unique_ptr<AdamW> opt;
  if (o.optimizer == "adamw") opt = std::make_unique<AdamW>(b.trainable);
  const std::string backend = sdpa_backend_for(m, o, device);
  reset_peak_memory(device);
  double loss_value = 0;
  auto times = timed_steps(b, opt.get(), o, device, loss_value);
  std::sort(times.begin(), times.end());
  const double med = times[times.size() / 2];
  const double tok = static_cast<double>(o.mbs * o.seq);
  const auto& cfg = m.config();
  const double attn = 12.0 * cfg.num_layers * cfg.hidden_size * o.seq;
  const double ftok = (o.mode == "lora" ? 4.0 : 6.0) * n_active + attn;
  nlohmann::ordered_json r = {
      {"impl", "lf-train"}, {"model_config", o.model_config}, {"mode", o.mode}, {"seq", o.seq}, {"mbs", o.mbs},
      {"param_dtype", model::scalar_type_name(b.param_dtype)},
      {"compute_dtype", model::scalar_type_name(m.compute_dtype())},
      {"optimizer", o.optimizer}, {"ckpt", o.gradient_checkpointing}, {"fused_loss", o.fused_loss},
      {"params", n_params}, {"active_params", std::llround(n_active)}, {"trainable", n_train},
      {"init_s", std::round(b.init_s * 10) / 10},
      {"step_s", std::round(med * 1e4) / 1e4},
      {"tok_s_per_gpu", std::llround(tok / med)},
      {"tflops_per_gpu", std::round(ftok * tok / med / 1e11) / 10},
      {"mfu", std::round(ftok * tok / med / (o.peak_tflops * 1e12) * 1000) / 1000},
      {"peak_mem_gib", std::round(static_cast<double>(peak_memory_bytes(device)) / (1 << 30) * 10) / 10},
      {"loss", std::round(loss_value * 1000) / 1000},
      {"sdpa_backend", backend},
      {"device", device_name(device)},
  };
  return r.dump();
}

}  // namespace lf::worker
