// bitsandbytes' 8-bit AdamW as LLaMA-Factory 0.9.5 runs it (`optim: adamw_8bit`, `adamw_bnb_8bit` or
// `paged_adamw_8bit`: HF Trainer's bitsandbytes.optim.AdamW with optim_bits 8; paging moves the states
// between host and device, not the numbers), as bitsandbytes 0.50's CPU backend computes it:
//   HF's decay groups (hf_decays); the embeddings' states 32-bit (HF registers that override for every
//   nn.Embedding) and so are those of tensors under 4096 elements (min_8bit_size), stepped by
//   optimizer_update_32bit: m, v in fp32, p -= lr sqrt(1 - b2^t) / (1 - b1^t) m / (sqrt(v) + eps sqrt(1 - b2^t));
//   the others keep m and v as uint8 codes in blocks of 256 consecutive elements, each block scaled by its
//   absmax to the signed (m) or unsigned (v) dynamic map (create_dynamic_map: lf_quant's tables), dequantized for the update
//   (torch's AdamW formula) and quantized again after it, to the nearest code through bitsandbytes' 65536-bin
//   lookup table over [-1, 1] (csrc/cpu_ops.cpp build_quantize_lut).
// On a CUDA device the same formulas run as ATen operations, rounding to the nearest code exactly.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "lf/optim/adamw.h"
#include "lf/optim/adamw_8bit.h"
#include "lf/optim/grad_utils.h"
#include "lf/quant/bnb_4bit.h"

namespace lf::optim {

namespace {

constexpr int64_t kBlock = 256;
constexpr int64_t kMin8bitSize = 4096;
struct CodeMap {
  std::vector<float> code;  // [256] ascending
  const uint8_t* lut;       // [65536]: bin of [-1, 1] -> code index (quant::dynamic_map_lut)
  at::Tensor code_t;        // [256] fp32 (CPU)
};

const CodeMap& code_map(bool is_signed) {
  static const auto make = [](bool s) {
    CodeMap m;
    const float* code = quant::dynamic_map(s);  // bitsandbytes' create_dynamic_map(s), sorted
    m.code.assign(code, code + 256);
    m.lut = quant::dynamic_map_lut(s);
    m.code_t = at::from_blob(m.code.data(), {256}, at::kFloat).clone();
    return m;
  };
  static const CodeMap signed_map = make(true), unsigned_map = make(false);
  return is_signed ? signed_map : unsigned_map;
}

// quantize_blockwise (CPU): x fp32 [n] -> codes [n], absmax [blocks].
void quantize_cpu(const at::Tensor& x, const CodeMap& m, at::Tensor& codes, at::Tensor& absmax) {
  const auto a = x.contiguous();
  const int64_t n = a.numel(), blocks = absmax.numel();
  const float* in = a.data_ptr<float>();
  uint8_t* out = codes.data_ptr<uint8_t>();
  float* am = absmax.data_ptr<float>();
  at::parallel_for(0, blocks, 16, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t begin = b * kBlock, end = std::min(begin + kBlock, n);
      float mx = 0.0f;
      for (int64_t i = begin; i < end; ++i) mx = std::max(mx, std::fabs(in[i]));
      am[b] = mx;
      const float inv = mx == 0.0f ? 0.0f : 1.0f / mx;
      for (int64_t i = begin; i < end; ++i) out[i] = m.lut[quant::dynamic_lut_index(in[i] * inv)];
    }
  });
}

// The same on any device with ATen operations: the nearest code (ties to the lower one).
void quantize_any(const at::Tensor& x, const CodeMap& m, at::Tensor& codes, at::Tensor& absmax) {
  const int64_t n = x.numel(), blocks = absmax.numel();
  auto padded = at::zeros({blocks * kBlock}, x.options());
  padded.narrow(0, 0, n).copy_(x.reshape({-1}));
  auto mx = padded.view({blocks, kBlock}).abs().amax(1);
  absmax.copy_(mx);
  const auto normed = (padded.view({blocks, kBlock}) / mx.clamp_min(1e-30).unsqueeze(1)).reshape({-1}).narrow(0, 0, n);
  const auto code = m.code_t.to(x.device());
  const auto mids = (code.slice(0, 0, 255) + code.slice(0, 1, 256)) * 0.5;
  codes.copy_(at::bucketize(normed, mids, /*out_int32=*/true).to(at::kByte).view(codes.sizes()));
}

at::Tensor dequantize(const at::Tensor& codes, const at::Tensor& absmax, const CodeMap& m) {
  const int64_t n = codes.numel();
  const auto code = m.code_t.to(codes.device());
  const auto v = code.index_select(0, codes.reshape({-1}).to(at::kLong));
  return v * absmax.repeat_interleave(kBlock).narrow(0, 0, n);
}

struct Slot {
  NamedTensor p;
  double weight_decay = 0;
  bool eight_bit = false;
  at::Tensor state1, state2, absmax1, absmax2;  // 8-bit: uint8 codes + fp32 absmax; else fp32 m, v
  int64_t step = 0;
};

class AdamW8bit final : public Optimizer {
 public:
  explicit AdamW8bit(const OptimizerInputs& in) : in_(in), lr_(in.learning_rate) {
    for (const auto& p : in.params) {
      Slot s;
      s.p = p;
      s.weight_decay = hf_decays(p.name) ? in.weight_decay : 0.0;
      s.eight_bit = p.tensor.numel() >= kMin8bitSize && p.name.find("embed_tokens") == std::string::npos;
      slots_.push_back(std::move(s));
    }
  }

  std::string_view name() const override { return "adamw_8bit"; }
  void set_lr(double lr) override { lr_ = lr; }
  int64_t steps() const override { return steps_; }

  void step(const at::Tensor& grad_factor) override {
    c10::NoGradGuard no_grad;
    ++steps_;
    init_state();
    for (auto& s : slots_) {
      const auto g = factored_grad(s.p.tensor, grad_factor);
      if (!g.defined()) continue;
      ++s.step;
      s.eight_bit ? step_8bit(s, g) : step_32bit(s, g);
    }
  }

  void zero_grad() override {
    for (auto& s : slots_)
      if (s.p.tensor.grad().defined()) s.p.tensor.mutable_grad() = at::Tensor();
  }

  std::vector<StateTensor> state() const override {
    std::vector<StateTensor> out;
    if (!ready_) return out;
    for (const auto& s : slots_) {
      out.push_back({s.p.name, "state1", s.state1});
      out.push_back({s.p.name, "state2", s.state2});
      if (!s.eight_bit) continue;
      out.push_back({s.p.name, "absmax1", s.absmax1});
      out.push_back({s.p.name, "absmax2", s.absmax2});
    }
    return out;
  }

  void load_state(const StateRead& read, int64_t steps) override {
    c10::NoGradGuard no_grad;
    init_state();
    for (auto& s : slots_) {
      read(s.p.name, "state1", s.state1);
      read(s.p.name, "state2", s.state2);
      if (s.eight_bit) {
        read(s.p.name, "absmax1", s.absmax1);
        read(s.p.name, "absmax2", s.absmax2);
      }
      s.step = steps;
    }
    steps_ = steps;
  }

 private:
  void init_state() {
    if (ready_) return;
    ready_ = true;
    for (auto& s : slots_) {
      const auto& p = s.p.tensor;
      if (!s.eight_bit) {
        s.state1 = at::zeros_like(p, p.options().dtype(at::kFloat));
        s.state2 = at::zeros_like(p, p.options().dtype(at::kFloat));
        continue;
      }
      const int64_t blocks = (p.numel() + kBlock - 1) / kBlock;
      s.state1 = at::zeros(p.sizes(), p.options().dtype(at::kByte));
      s.state2 = at::zeros(p.sizes(), p.options().dtype(at::kByte));
      s.absmax1 = at::zeros({blocks}, p.options().dtype(at::kFloat));
      s.absmax2 = at::zeros({blocks}, p.options().dtype(at::kFloat));
    }
  }

  // bitsandbytes' _optimizer_update_32bit_cpu ("adam", max_unorm 0).
  void step_32bit(Slot& s, const at::Tensor& g) {
    auto p = s.p.tensor;
    const double b1 = in_.beta1, b2 = in_.beta2, t = static_cast<double>(s.step);
    const auto gf = g.to(at::kFloat) * 1.0;
    s.state1.mul_(b1).add_(gf, 1.0 - b1);
    s.state2.mul_(b2).addcmul_(gf, gf, 1.0 - b2);
    const double c1 = 1.0 - std::pow(b1, t), c2 = std::sqrt(1.0 - std::pow(b2, t));
    const double step_size = -lr_ * c2 / c1;
    if (s.weight_decay > 0) p.mul_(1.0 - lr_ * s.weight_decay);
    const auto update = s.state1 / (s.state2.sqrt() + in_.eps * c2);
    p.add_(update, step_size * 1.0);
  }

  // bitsandbytes' _optimizer_update_8bit_blockwise_cpu ("adam").
  void step_8bit(Slot& s, const at::Tensor& g) {
    auto p = s.p.tensor;
    const auto& m1 = code_map(true);
    const auto& m2 = code_map(false);
    auto s1 = dequantize(s.state1, s.absmax1, m1);
    auto s2 = dequantize(s.state2, s.absmax2, m2);
    const double b1 = in_.beta1, b2 = in_.beta2, t = static_cast<double>(s.step);
    const auto grad = g.to(at::kFloat).reshape({-1}) * 1.0;
    s1.mul_(b1).add_(grad, 1.0 - b1);
    s2.mul_(b2).addcmul_(grad, grad, 1.0 - b2);
    const double c1 = 1.0 - std::pow(b1, t), c2 = std::sqrt(1.0 - std::pow(b2, t));
    const auto denom = (s2.sqrt() / c2).add_(in_.eps);
    auto pf = p.view({-1});
    if (s.weight_decay > 0) pf.mul_(1.0 - lr_ * s.weight_decay);
    pf.addcdiv_(s1, denom, -lr_ / c1);
    const bool cpu = p.device().is_cpu();
    auto q1 = s.state1.view({-1}), q2 = s.state2.view({-1});
    (cpu ? quantize_cpu : quantize_any)(s1, m1, q1, s.absmax1);
    (cpu ? quantize_cpu : quantize_any)(s2, m2, q2, s.absmax2);
  }

  OptimizerInputs in_;
  double lr_;
  int64_t steps_ = 0;
  bool ready_ = false;
  std::vector<Slot> slots_;
};

}  // namespace

std::unique_ptr<Optimizer> make_adamw_8bit(const OptimizerInputs& in) { return std::make_unique<AdamW8bit>(in); }

std::pair<at::Tensor, at::Tensor> quantize_8bit_dynamic(const at::Tensor& x, bool is_signed) {
  const int64_t blocks = (x.numel() + kBlock - 1) / kBlock;
  auto codes = at::empty({x.numel()}, at::kByte);
  auto absmax = at::empty({blocks}, at::kFloat);
  quantize_cpu(x.to(at::kFloat).reshape({-1}), code_map(is_signed), codes, absmax);
  return {codes, absmax};
}

at::Tensor dynamic_code(bool is_signed) { return code_map(is_signed).code_t.clone(); }

}  // namespace lf::optim
