#include "lf/model/causal_lm.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <fmt/ranges.h>

#include <cmath>
#include <mutex>

#include "lf/common/error.h"
#include "lf/model/checkpointing.h"
#include "lf/model/grad_sink.h"
#include "lf/model/layer_builder.h"
#include "lf/model/packed_attention.h"
#include "lf/model/varlen_attention.h"

namespace lf::model {

at::Tensor rope_inv_freq(const ModelConfig& c) {
  // As transformers computes it: fp32 powers of theta over even dims.
  const int64_t d = c.head_dim;
  auto exponents = at::arange(0, d, 2, at::TensorOptions().dtype(at::kLong)).to(at::kFloat) / static_cast<double>(d);
  auto inv_freq = 1.0 / at::pow(c.rope.theta, exponents);
  if (c.rope.type == "llama3") {
    const auto& r = c.rope;
    const double old_len = static_cast<double>(r.original_max_position_embeddings);
    const double low_freq_wavelen = old_len / r.low_freq_factor;
    const double high_freq_wavelen = old_len / r.high_freq_factor;
    auto wavelen = 2 * M_PI / inv_freq;
    auto scaled = at::where(wavelen > low_freq_wavelen, inv_freq / r.factor, inv_freq);
    auto smooth = (old_len / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
    auto smoothed = (1 - smooth) * scaled / r.factor + smooth * scaled;
    auto medium = at::logical_and(wavelen >= high_freq_wavelen, wavelen <= low_freq_wavelen);
    inv_freq = at::where(medium, smoothed, scaled);
  }
  return inv_freq;
}

CausalLM::CausalLM(ModelConfig config, const at::TensorOptions& o)
    : config_(std::move(config)), layout_(model_layout(config_)), compute_dtype_(o.dtype().toScalarType()) {
  const auto& c = config_;
  const int64_t h = c.hidden_size;
  embed_tokens_ = at::empty({c.vocab_size, h}, o);
  router_aux_ = std::make_unique<RouterAuxLoss>(layout_.moe_layers);
  layers_.reserve(layout_.layers.size());
  for (const auto& spec : layout_.layers) layers_.push_back(build_decoder_layer(spec, o, router_aux_.get()));
  norm_ = build_norm(layout_.final_norm, h, c.rms_norm_eps, o);
  if (!c.tie_word_embeddings) lm_head_ = at::empty({c.vocab_size, h}, o);
  inv_freq_ = rope_inv_freq(c).to(o.device());
  check_layout();
}

// The modules and the layout are two declarations of one model (layer_builder.cpp, model_layout.cpp):
// every tensor in the same order, name and shape, every linear module by its name.
void CausalLM::check_layout() {
  const auto params = module_parameters();
  LF_CHECK(params.size() == layout_.params.size(), BackendError,
           "{}: the modules hold {} parameters, its layout {}", config_.architecture_name, params.size(),
           layout_.params.size());
  for (size_t k = 0; k < params.size(); ++k) {
    const auto& want = layout_.params[k];
    LF_CHECK(params[k].name == want.local && params[k].tensor->sizes().vec() == want.shape, BackendError,
             "{}: parameter {} of the modules is {} [{}], the layout's {} [{}]", config_.architecture_name, k,
             params[k].name, fmt::join(params[k].tensor->sizes(), ", "), want.name, fmt::join(want.shape, ", "));
  }
  size_t k = 0;
  for (size_t i = 0; i < layers_.size(); ++i)
    for (const auto& [name, lin] : layers_[i].linears()) {
      LF_CHECK(k < layout_.linears.size() && layout_.linears[k].layer == static_cast<int64_t>(i) &&
                   layout_.linears[k].module.ends_with("." + name),
               BackendError, "{}: layer {}'s linear {} is not the layout's linear {}", config_.architecture_name, i,
               name, k < layout_.linears.size() ? layout_.linears[k].module : "(none)");
      ++k;
    }
  LF_CHECK(k == layout_.linears.size(), BackendError, "{}: the layout lists {} linear modules, the layers {}",
           config_.architecture_name, layout_.linears.size(), k);
}

at::Tensor CausalLM::embed(const at::Tensor& input_ids) const {
  LF_CHECK(input_ids.dim() == 2, ConfigError, "input_ids must be [B,T], got {} dims", input_ids.dim());
  return embed_for_compute(embed_tokens_, input_ids, compute_dtype_, &embed_rows_to_sink_);
}

RopeTables CausalLM::rope(int64_t seq_len, const at::Tensor& position_ids, const at::Tensor& segment_ids) const {
  // freqs [.., T, D/2] in fp32, duplicated to [.., T, D] (HF's cat(freqs, freqs)).
  at::Tensor pos = position_ids.defined()
                       ? position_ids.to(inv_freq_.device(), at::kFloat).unsqueeze(1).unsqueeze(-1)  // [B,1,T,1]
                       : at::arange(seq_len, inv_freq_.options()).unsqueeze(-1);                    // [T,1]
  auto freqs = pos * inv_freq_;
  auto emb = at::cat({freqs, freqs}, -1);
  RopeTables r{emb.cos().to(compute_dtype_), emb.sin().to(compute_dtype_), {}, {}};
  if (!segment_ids.defined()) return r;
  const auto device = inv_freq_.device();
  if (varlen_attention_supported(device, compute_dtype_, config_.head_dim))
    r.varlen = varlen_segments(segment_ids, device);  // give segment_ids on the host: no sync
  else
    r.attn_mask = packed_causal_mask(segment_ids.to(device));
  return r;
}

at::Tensor CausalLM::final_norm(const at::Tensor& hidden) const { return norm_.forward(hidden); }

at::Tensor CausalLM::head(const at::Tensor& hidden) const {
  const auto& w = lm_head_weight();
  auto x = norm_.forward(hidden);
  return at::linear(x, w.scalar_type() == x.scalar_type() ? w : w.to(x.scalar_type()));
}

at::Tensor CausalLM::forward(const at::Tensor& input_ids, const at::Tensor& position_ids,
                             const at::Tensor& segment_ids) const {
  return head(hidden_states(input_ids, position_ids, nullptr, segment_ids));
}

at::Tensor CausalLM::hidden_states(const at::Tensor& input_ids, const at::Tensor& position_ids,
                                   UnitHooks* hooks, const at::Tensor& segment_ids) const {
  auto x = run_unit(hooks, 0, input_ids, [this](const at::Tensor& ids) { return embed(ids); });
  const auto r = rope(input_ids.size(1), position_ids, segment_ids);
  const bool checkpoint = gradient_checkpointing_ && c10::GradMode::is_enabled();
  for (size_t i = 0; i < layers_.size(); ++i) {
    const auto& l = layers_[i];
    x = run_unit(hooks, static_cast<int64_t>(i) + 1, x, [&](const at::Tensor& in) {
      return checkpoint ? checkpointed_layer_forward(l, in, r, training_) : l.forward(in, r, training_);
    });
  }
  return x;
}

std::vector<NamedParam> CausalLM::module_parameters() {
  std::vector<NamedParam> out;
  out.push_back({"embed_tokens.weight", &embed_tokens_});
  for (auto& l : layers_) l.named_parameters("", out);
  out.push_back({"norm.weight", &norm_.weight_});
  if (lm_head_.defined()) out.push_back({"lm_head.weight", &lm_head_});
  return out;
}

std::vector<NamedParam> CausalLM::named_parameters() {
  auto out = module_parameters();
  for (size_t k = 0; k < out.size(); ++k) {
    out[k].name = layout_.params[k].name;
    out[k].unit = layout_.params[k].unit;
  }
  return out;
}

std::vector<ModelLinear> CausalLM::linears() {
  std::vector<ModelLinear> out;
  for (auto& l : layers_)
    for (auto& [name, lin] : l.linears()) out.push_back({&layout_.linears[out.size()], lin});
  return out;
}

void CausalLM::init_random(uint64_t seed) {
  c10::NoGradGuard no_grad;
  auto gen = at::globalContext().defaultGenerator(embed_tokens_.device());
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_current_seed(seed);
  }
  const double std = config_.initializer_range;
  const auto params = named_parameters();
  for (size_t k = 0; k < params.size(); ++k) switch (layout_.params[k].init) {
      case ParamInit::kOnes: params[k].tensor->fill_(1.0); break;
      case ParamInit::kZeros: params[k].tensor->zero_(); break;
      case ParamInit::kNormal: params[k].tensor->normal_(0.0, std, gen); break;
    }
}

}  // namespace lf::model
