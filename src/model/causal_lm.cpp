#include "lf/model/causal_lm.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <tuple>
#include <utility>

#include "lf/common/error.h"
#include "lf/model/checkpointing.h"
#include "lf/model/grad_sink.h"
#include "lf/model/layer_builder.h"
#include "lf/model/packed_attention.h"
#include "lf/model/varlen_attention.h"
#include "lf/model/host_copies.h"

namespace lf::model {

namespace {

// transformers' _compute_yarn_parameters: each frequency between its extrapolated (theta^-2i/d) and
// interpolated (/ factor) value, by a linear ramp over the dimensions whose wavelengths fit between
// beta_fast and beta_slow rotations in original_max_position_embeddings.
at::Tensor yarn_inv_freq(const ModelConfig& c, const RopeConfig& r, const at::Tensor& pos_freqs) {
  const double dim = static_cast<double>(c.head_dim), base = r.theta;
  const auto correction_dim = [&](double rotations) {
    return dim * std::log(static_cast<double>(r.original_max_position_embeddings) / (rotations * 2 * M_PI)) /
           (2 * std::log(base));
  };
  double low = correction_dim(r.beta_fast), high = correction_dim(r.beta_slow);
  if (r.truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1);
  if (low == high) high += 0.001;
  const auto ramp = at::clamp((at::arange(c.head_dim / 2, at::kFloat) - low) / (high - low), 0, 1);
  const auto extrapolation = 1 - ramp;
  const auto interpolated = 1.0 / (r.factor * pos_freqs), extrapolated = 1.0 / pos_freqs;
  return interpolated * (1 - extrapolation) + extrapolated * extrapolation;
}

}  // namespace

double rope_attention_scaling(const RopeConfig& r) { return r.type == "yarn" ? r.attention_factor : 1.0; }

at::Tensor rope_inv_freq(const ModelConfig& c) { return rope_inv_freq(c, c.rope); }

at::Tensor rope_inv_freq(const ModelConfig& c, const RopeConfig& r) {
  // As transformers computes it: fp32 powers of theta over even dims.
  const int64_t d = c.head_dim;
  auto exponents = at::arange(0, d, 2, at::TensorOptions().dtype(at::kLong)).to(at::kFloat) / static_cast<double>(d);
  if (r.type == "yarn") return yarn_inv_freq(c, r, at::pow(r.theta, exponents));
  auto inv_freq = 1.0 / at::pow(r.theta, exponents);
  // linear divides every frequency by factor; dynamic NTK is the default one on rows within
  // max_position_embeddings (the trainer refuses longer ones).
  if (r.type == "linear") inv_freq = inv_freq / r.factor;
  if (r.type == "llama3") {
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
  if (c.local_rope) local_inv_freq_ = rope_inv_freq(c, *c.local_rope).to(o.device());
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
  auto x = embed_for_compute(embed_tokens_, input_ids, compute_dtype_, &embed_rows_to_sink_);
  // Gemma: times sqrt(hidden_size) rounded to the activations' dtype (transformers rounds it to the
  // weights' dtype, which is the activations' under bf16 training).
  if (config_.embedding_multiplier != 1.0)
    x = x * at::scalar_tensor(config_.embedding_multiplier, x.options()).to(compute_dtype_);
  return x;
}

RopeTables CausalLM::rope(int64_t seq_len, const at::Tensor& position_ids, const at::Tensor& segment_ids) const {
  // freqs [.., T, D/2] in fp32, duplicated to [.., T, D] (HF's cat(freqs, freqs)).
  at::Tensor pos = position_ids.defined()
                       ? position_ids.to(inv_freq_.device(), at::kFloat).unsqueeze(1).unsqueeze(-1)  // [B,1,T,1]
                       : at::arange(seq_len, inv_freq_.options()).unsqueeze(-1);                    // [T,1]
  const auto tables = [&](const at::Tensor& inv_freq, const RopeConfig& rc) {
    auto freqs = pos * inv_freq;
    auto emb = at::cat({freqs, freqs}, -1);
    auto cos = emb.cos(), sin = emb.sin();
    if (const double s = rope_attention_scaling(rc); s != 1.0) cos = cos * s, sin = sin * s;  // yarn
    return std::make_pair(cos.to(compute_dtype_), sin.to(compute_dtype_));
  };
  RopeTables r;
  std::tie(r.cos, r.sin) = tables(inv_freq_, config_.rope);
  if (local_inv_freq_.defined()) std::tie(r.local_cos, r.local_sin) = tables(local_inv_freq_, *config_.local_rope);
  if (!segment_ids.defined()) return r;
  const auto device = inv_freq_.device();
  // Sliding-window layers too: the varlen kernel applies their window within each sequence (layers.cpp).
  if (varlen_attention_supported(device, compute_dtype_, config_.head_dim))
    r.varlen = varlen_segments(segment_ids, device);  // give segment_ids on the host: no sync
  else
    r.attn_mask = packed_causal_mask(to_device(segment_ids, device));
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
  // A linear layer with a number format (linear_format.h) lists its storage tensors where the layout
  // has its weight: the first under the weight's name, the others under it plus their suffix.
  size_t k = 0;
  for (auto& p : out) {
    if (k < layout_.params.size() && p.name == layout_.params[k].local) {
      p.name = layout_.params[k].name;
      p.unit = layout_.params[k++].unit;
      continue;
    }
    LF_CHECK(k > 0, BackendError, "{}: the module tensor {} precedes the layout's first", config_.architecture_name,
             p.name);
    const auto& owner = layout_.params[k - 1];
    LF_CHECK(p.name.starts_with(owner.local + "."), BackendError,
             "{}: the module tensor {} is neither the layout's {} nor a storage tensor of {}", config_.architecture_name,
             p.name, k < layout_.params.size() ? layout_.params[k].local : "(end)", owner.local);
    p.name = owner.name + p.name.substr(owner.local.size());
    p.unit = owner.unit;
  }
  return out;
}

void CausalLM::to(const c10::Device& device) {
  c10::NoGradGuard no_grad;
  for (auto& p : module_parameters()) *p.tensor = p.tensor->to(device);
  inv_freq_ = inv_freq_.to(device);
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
