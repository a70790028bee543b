#pragma once
// Which vector path host_adamw_update runs: the best this CPU supports, chosen
// once at run time (the binary itself targets baseline x86-64), or the one named
// by LF_HOST_ADAM_ISA=avx512|avx2|scalar (tests, benchmarks, a suspected ISA bug).
#include <cstdint>
#include <optional>
#include <string>

#include "lf/offload/host_adamw.h"

namespace lf::offload {

enum class HostAdamWIsa { kScalar, kAvx2, kAvx512 };

const char* host_adamw_isa_name(HostAdamWIsa isa);
// Whether this build has the path and this CPU (and OS) runs it.
bool host_adamw_isa_supported(HostAdamWIsa isa);
// The path named by `forced` (ConfigError if unknown or unsupported here), else the best supported.
HostAdamWIsa host_adamw_isa_for(const std::optional<std::string>& forced);
// host_adamw_isa_for(LF_HOST_ADAM_ISA), decided at the first call and kept for the process.
HostAdamWIsa host_adamw_isa();

// host_adamw_update through one named path (tests force each; ConfigError if unsupported).
void host_adamw_update_isa(HostAdamWIsa isa, float* param, float* exp_avg, float* exp_avg_sq, const float* grad,
                           uint16_t* out_bf16, int64_t n, const HostAdamWStep& s);

}  // namespace lf::offload
