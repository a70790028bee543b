#include "lf/worker/check_logits.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <nlohmann/json.hpp>

#include "lf/model/loader.h"
#include "lf/model/sdpa.h"
#include "lf/model/tensor_io.h"
#include "lf/worker/device.h"

namespace lf::worker {

std::string run_check_logits(const CheckLogitsOptions& o) {
  const auto device = pick_device(o.device);
  model::LoadOptions lo;
  lo.random_init = true;
  lo.seed = o.seed;
  lo.device = device;
  lo.param_dtype = at::kBFloat16;
  auto m = model::load_causal_lm(o.model_config, lo);
  model::SaveOptions so;
  so.dtype = at::kBFloat16;
  model::save_causal_lm(*m, o.out_dir, so);

  c10::NoGradGuard no_grad;
  const auto& cfg = m->config();
  auto gen = at::globalContext().defaultGenerator(at::kCPU);
  gen.set_current_seed(o.seed + 1);
  auto ids = at::randint(0, cfg.vocab_size, {o.batch, o.seq}, gen, at::TensorOptions().dtype(at::kLong));
  auto ids_dev = ids.to(device);
  auto logits_bf16 = m->forward(ids_dev).to(at::kFloat).cpu();  // [B,T,V]
  m->set_compute_dtype(at::kFloat);                              // same bf16 weights, fp32 math
  auto logits_fp32 = m->forward(ids_dev).cpu();
  model::save_tensor_file(std::filesystem::path(o.out_dir) / "lf_logits.safetensors",
                          {{"input_ids", ids}, {"logits_bf16", logits_bf16}, {"logits_fp32", logits_fp32}});
  auto q = at::empty({o.batch, cfg.num_heads, o.seq, cfg.head_dim}, at::TensorOptions().dtype(at::kBFloat16).device(device));
  auto k = at::empty({o.batch, cfg.num_kv_heads, o.seq, cfg.head_dim}, q.options());
  nlohmann::ordered_json r = {{"model_config", o.model_config},
                              {"batch", o.batch},
                              {"seq", o.seq},
                              {"sdpa_backend_bf16", model::sdpa_backend_name(q, k, k)},
                              {"device", device_name(device)}};
  return r.dump();
}

}  // namespace lf::worker
