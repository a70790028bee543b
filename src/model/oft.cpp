#include "lf/model/oft.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <nlohmann/json.hpp>

#include "lf/common/error.h"
#include "lf/model/backward_only_linear.h"
#include "lf/model/grad_sink.h"
#include "lf/model/layers.h"
#include "lf/model/lora.h"

namespace lf::model {

void check_oft_config(const OftConfig& c) {
  LF_CHECK(c.rank >= 0 && c.block_size >= 0, ConfigError,
           "oft_rank and oft_block_size must be >= 0, got oft_rank {} and oft_block_size {}", c.rank, c.block_size);
  LF_CHECK(c.rank != 0 || c.block_size != 0, ConfigError,
           "finetuning_type oft: oft_rank and oft_block_size are both 0 (peft's OFTConfig needs one of them); set "
           "oft_block_size (LLaMA-Factory's default 32) or oft_rank");
  LF_CHECK(c.rank == 0 || c.block_size == 0, ConfigError,
           "finetuning_type oft: oft_rank {} and oft_block_size {} are both set, and peft's OFTConfig refuses that "
           "(r x oft_block_size = in_features): set oft_block_size: 0 to use oft_rank, or leave oft_rank at 0",
           c.rank, c.block_size);
  LF_CHECK(c.num_cayley_neumann_terms >= 1, ConfigError, "num_cayley_neumann_terms must be >= 1, got {}",
           c.num_cayley_neumann_terms);
}

namespace {

// Q [B, n] -> the skew-symmetric [B, b, b] with Q's entries in the upper triangle, row by row (peft's
// _pytorch_skew_symmetric: triu_indices(b, b, 1)), their negatives below.
at::Tensor skew_symmetric(const at::Tensor& q, int64_t b) {
  const auto opts = at::TensorOptions().dtype(at::kLong).device(q.device());
  const auto tri = at::triu_indices(b, b, 1, opts);     // [2, n]
  const auto flat_index = tri[0] * b + tri[1];          // [n] positions in the flattened [b*b]
  const auto flat = at::zeros({q.size(0), b * b}, q.options()).index_copy(1, flat_index, q);
  const auto m = flat.view({q.size(0), b, b});
  return m - m.transpose(-2, -1);
}

// peft's _cayley_batch. Under autocast (activations in bf16 / fp16) torch runs its bmm's in that dtype while R
// stays fp32 (eye's dtype): `mm` is the product's dtype, the sums are fp32 as there.
at::Tensor oft_rotations_in(const OftWeights& w, at::ScalarType mm) {
  // One use of the weight per forward, through its strategy's gradient route (grad_sink.h), in fp32 (peft's).
  const auto q = skew_symmetric(cast_for_compute(w.weight_, at::kFloat), w.block_size_);  // [r, b, b]
  const int64_t r = q.size(0), b = w.block_size_;
  if (!w.use_cayley_neumann_) {
    // (I - Q)(I + Q)^-1: solve(I + Q, I - Q, left=False).
    const auto id = at::eye(b, q.options()).unsqueeze(0).expand({r, b, b});
    return at::linalg_solve(id + q, id - q, /*left=*/false);
  }
  auto bmm = [mm](const at::Tensor& a, const at::Tensor& c) { return at::bmm(a.to(mm), c.to(mm)); };
  auto rot = at::eye(b, q.options()).repeat({r, 1, 1});
  const int64_t terms = w.neumann_terms_;
  if (terms > 1) {
    rot = rot.add(q, 2.0);
    if (terms > 2) {
      auto power = bmm(q, q);  // Q²
      rot = rot.add(power, 2.0);
      for (int64_t i = 3; i < terms - 1; ++i) {
        power = bmm(power, q);
        rot = rot.add(power, 2.0);
      }
      power = bmm(power, q);
      rot = rot.add(power);
    }
  }
  return rot;
}

}  // namespace

OftWeights make_oft_weights(const OftConfig& c, int64_t in, const c10::Device& device) {
  OftWeights w;
  w.block_size_ = oft_block_size_for(c, in);
  const int64_t r = in / w.block_size_, n = w.block_size_ * (w.block_size_ - 1) / 2;
  w.weight_ = at::zeros({r, n}, at::TensorOptions().dtype(at::kFloat).device(device)).set_requires_grad(true);
  w.use_cayley_neumann_ = c.use_cayley_neumann;
  w.neumann_terms_ = c.num_cayley_neumann_terms;
  return w;
}

at::Tensor oft_rotations(const OftWeights& w) {
  c10::NoGradGuard no_grad;  // merges and checks: no gradient, no route
  return oft_rotations_in(w, at::kFloat);
}

at::Tensor oft_rotate(const at::Tensor& x, const OftWeights& w) {
  const auto dt = x.scalar_type();
  const auto rot = oft_rotations_in(w, dt);  // [r, b, b]
  auto sizes = x.sizes().vec();
  std::vector<int64_t> blocks(sizes.begin(), sizes.end() - 1);
  blocks.push_back(rot.size(0));
  blocks.push_back(w.block_size_);
  // x [.., in] -> [.., r, b]; each block times its rotation (peft: einsum("...rk,rkc->...rc")) in the autocast
  // dtype, which is fp32 on an fp32 run.
  const auto xr = at::einsum("...rk,rkc->...rc", {x.to(dt).reshape(blocks), rot.to(dt)});
  return xr.reshape(sizes).to(dt);
}

at::Tensor oft_merged_weight(const at::Tensor& weight, const OftWeights& w) {
  c10::NoGradGuard no_grad;
  const auto rot = oft_rotations(w);  // [r, b, b]
  std::vector<at::Tensor> blocks;
  for (int64_t i = 0; i < rot.size(0); ++i) blocks.push_back(rot[i]);
  const auto bd = at::block_diag(blocks);  // [in, in]
  // peft: mm(R_bd, W^T)^T.
  return at::mm(bd, weight.detach().to(bd.device(), at::kFloat).t()).t().contiguous();
}

// The rotated input through the base projection (its own format's GEMM when it has one: OFT over 4-bit weights
// as peft's bnb Linear4bit runs it, the rotation first).
at::Tensor Linear::forward_oft(const at::Tensor& x, bool base_values) const {
  const auto xr = oft_rotate(x, *oft_);
  const auto b = bias_.defined() ? cast_for_compute(bias_, xr.scalar_type()) : at::Tensor();
  if (format_) return format_->linear(xr, b, base_values);
  const auto w = cast_for_compute(weight_, xr.scalar_type());
  return base_values ? at::linear(xr, w, b.defined() ? std::optional<at::Tensor>(b) : std::nullopt)
                     : backward_only_linear(xr, w, b);
}

OftConfig oft_config_from_adapter_json(const std::string& text, const std::string& where) {
  const auto j = nlohmann::json::parse(text);
  for (const char* key : {"coft", "block_share", "fan_in_fan_out"})
    LF_CHECK(!j.value(key, false), ConfigError,
             "{}: `{}` is true; lf-train computes OFT as LLaMA-Factory configures it (coft, block_share and "
             "fan_in_fan_out false): retrain the adapter without it, or merge it with peft first", where, key);
  LF_CHECK(j.value("init_weights", true), ConfigError,
           "{}: init_weights is false (peft's random OFT init, a test setting); lf-train reads trained adapters", where);
  OftConfig c;
  c.rank = j.value("r", int64_t{0});
  c.block_size = j.value("oft_block_size", int64_t{0});
  c.module_dropout = j.value("module_dropout", 0.0);
  c.use_cayley_neumann = j.value("use_cayley_neumann", true);
  c.num_cayley_neumann_terms = j.value("num_cayley_neumann_terms", int64_t{5});
  check_oft_config(c);
  return c;
}

std::string peft_oft_adapter_config(const OftConfig& c, const std::string& base_model,
                                    const std::vector<std::string>& target_modules,
                                    const std::vector<std::string>& modules_to_save) {
  // Every field peft's OFTConfig writes, its defaults where LLaMA-Factory has no say (json: sorted keys).
  const nlohmann::json j = {
      {"auto_mapping", nullptr},
      {"base_model_name_or_path", base_model},
      {"bias", "none"},
      {"block_share", false},
      {"coft", false},
      {"eps", 6e-05},
      {"exclude_modules", nullptr},
      {"fan_in_fan_out", false},
      {"inference_mode", true},
      {"init_weights", true},
      {"layers_pattern", nullptr},
      {"layers_to_transform", nullptr},
      {"module_dropout", c.module_dropout},
      {"modules_to_save", modules_to_save.empty() ? nlohmann::json() : nlohmann::json(modules_to_save)},
      {"num_cayley_neumann_terms", c.num_cayley_neumann_terms},
      {"oft_block_size", c.block_size},
      {"peft_type", "OFT"},
      {"peft_version", kPeftFormatVersion},
      {"r", c.rank},
      {"revision", nullptr},
      {"target_modules", target_modules},
      {"task_type", "CAUSAL_LM"},
      {"use_cayley_neumann", c.use_cayley_neumann},
  };
  return j.dump(2);
}

}  // namespace lf::model
