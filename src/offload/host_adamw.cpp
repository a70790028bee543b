// host_adamw_update: checks the step, rounds its scalars as torch does, and runs
// the ISA path chosen once for this process.
#include "lf/offload/host_adamw.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "host_adamw_kernel.h"
#include "lf/common/env.h"
#include "lf/common/env_knobs.h"
#include "lf/common/error.h"
#include "lf/offload/host_adamw_isa.h"

namespace lf::offload {

namespace {

void check_step(const HostAdamWStep& s, int64_t n) {
  LF_CHECK(n >= 0, ConfigError, "host AdamW: element count must be >= 0, got {}", n);
  LF_CHECK(s.step >= 1, ConfigError, "host AdamW: step is 1-based (the step being taken), got {}", s.step);
  LF_CHECK(std::isfinite(s.lr) && s.lr >= 0, ConfigError, "host AdamW: learning rate must be finite and >= 0, got {}",
           s.lr);
  LF_CHECK(s.beta1 >= 0 && s.beta1 < 1 && s.beta2 >= 0 && s.beta2 < 1, ConfigError,
           "host AdamW: betas must be in [0, 1), got ({}, {})", s.beta1, s.beta2);
  LF_CHECK(s.eps > 0 && std::isfinite(s.eps), ConfigError, "host AdamW: eps must be > 0, got {}", s.eps);
  LF_CHECK(std::isfinite(s.weight_decay), ConfigError, "host AdamW: weight_decay must be finite, got {}",
           s.weight_decay);
}

// Scalars as torch.optim.AdamW computes them: Python floats (double), rounded to
// float when a float tensor op takes them (adam.py, capturable=False).
detail::AdamWConstants make_adamw_constants(const HostAdamWStep& s) {
  const double t = static_cast<double>(s.step);
  const double bias_correction1 = 1 - std::pow(s.beta1, t);
  const double bias_correction2 = 1 - std::pow(s.beta2, t);
  const float lerp_weight = static_cast<float>(1 - s.beta1);
  const bool small = std::abs(lerp_weight) < 0.5f;  // ATen's is_lerp_weight_small
  return detail::AdamWConstants{
      .grad_scale = s.grad_scale,
      .decay = static_cast<float>(1 - s.lr * s.weight_decay),
      .lerp_coeff = small ? lerp_weight : lerp_weight - 1.0f,
      .beta2 = static_cast<float>(s.beta2),
      .one_minus_beta2 = static_cast<float>(1 - s.beta2),
      .bc2_sqrt = static_cast<float>(std::pow(bias_correction2, 0.5)),
      .eps = static_cast<float>(s.eps),
      .neg_step_size = static_cast<float>((s.lr / bias_correction1) * -1),
      .lerp_small = small,
  };
}

using Kernel = void (*)(const detail::AdamWSpan&, const detail::AdamWConstants&);

Kernel kernel_for(HostAdamWIsa isa) {
  switch (isa) {
#if defined(LF_HOST_ADAMW_X86)
    case HostAdamWIsa::kAvx512: return &detail::adamw_avx512;
    case HostAdamWIsa::kAvx2: return &detail::adamw_avx2;
#endif
    default: return &detail::adamw_scalar;
  }
}

void run(Kernel kernel, float* param, float* exp_avg, float* exp_avg_sq, const float* grad, uint16_t* out_bf16,
         int64_t n, const HostAdamWStep& s) {
  check_step(s, n);
  if (n == 0) return;
  LF_CHECK(param && exp_avg && exp_avg_sq && grad, ConfigError,
           "host AdamW: param, exp_avg, exp_avg_sq and grad must all be non-null for {} elements", n);
  kernel({param, exp_avg, exp_avg_sq, grad, out_bf16, n}, make_adamw_constants(s));
}

}  // namespace

const char* host_adamw_isa_name(HostAdamWIsa isa) {
  switch (isa) {
    case HostAdamWIsa::kAvx512: return "avx512";
    case HostAdamWIsa::kAvx2: return "avx2";
    case HostAdamWIsa::kScalar: return "scalar";
  }
  return "?";
}

bool host_adamw_isa_supported(HostAdamWIsa isa) {
  switch (isa) {
    case HostAdamWIsa::kScalar: return true;
#if defined(LF_HOST_ADAMW_X86)
    // libgcc's cpu model also checks that the OS saves the vector state (XCR0).
    case HostAdamWIsa::kAvx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case HostAdamWIsa::kAvx512: return __builtin_cpu_supports("avx512f");
#endif
    default: return false;
  }
}

HostAdamWIsa host_adamw_isa_for(const std::optional<std::string>& forced) {
  if (!forced) {
    for (auto isa : {HostAdamWIsa::kAvx512, HostAdamWIsa::kAvx2})
      if (host_adamw_isa_supported(isa)) return isa;
    return HostAdamWIsa::kScalar;
  }
  for (auto isa : {HostAdamWIsa::kAvx512, HostAdamWIsa::kAvx2, HostAdamWIsa::kScalar}) {
    if (*forced != host_adamw_isa_name(isa)) continue;
    LF_CHECK(host_adamw_isa_supported(isa), ConfigError,
             "LF_HOST_ADAM_ISA={}: this CPU or build does not support it; unset it or use scalar", *forced);
    return isa;
  }
  LF_THROW(ConfigError, "LF_HOST_ADAM_ISA='{}': expected avx512, avx2 or scalar", *forced);
}

HostAdamWIsa host_adamw_isa() {
  static const HostAdamWIsa chosen = host_adamw_isa_for(knob_string("LF_HOST_ADAM_ISA"));
  return chosen;
}

void host_adamw_update_isa(HostAdamWIsa isa, float* param, float* exp_avg, float* exp_avg_sq, const float* grad,
                           uint16_t* out_bf16, int64_t n, const HostAdamWStep& s) {
  LF_CHECK(host_adamw_isa_supported(isa), ConfigError, "host AdamW: the {} path is not supported on this CPU/build",
           host_adamw_isa_name(isa));
  run(kernel_for(isa), param, exp_avg, exp_avg_sq, grad, out_bf16, n, s);
}

void host_adamw_update(float* param, float* exp_avg, float* exp_avg_sq, const float* grad, uint16_t* out_bf16,
                       int64_t n, const HostAdamWStep& s) {
  static const Kernel kernel = kernel_for(host_adamw_isa());
  run(kernel, param, exp_avg, exp_avg_sq, grad, out_bf16, n, s);
}

void host_adamw_update(HostThreadPool& pool, float* param, float* exp_avg, float* exp_avg_sq, const float* grad,
                       uint16_t* out_bf16, int64_t n, const HostAdamWStep& s) {
  check_step(s, n);  // once, on the calling thread, before any piece starts
  pool.parallel_for(n, kHostAdamWGrain, [&](int64_t begin, int64_t end) {
    host_adamw_update(param + begin, exp_avg + begin, exp_avg_sq + begin, grad + begin,
                      out_bf16 ? out_bf16 + begin : nullptr, end - begin, s);
  });
}

}  // namespace lf::offload
