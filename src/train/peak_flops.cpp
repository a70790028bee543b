// Built without the shared PCH when LF_WITH_CUDA is on: the define is for this file only.
#include "peak_flops.h"

#include <array>
#include <string>
#include <string_view>

#include "lf/common/log.h"

#ifdef LF_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace lf::train {
namespace {

struct GpuPeak {
  std::string_view name_part;  // as cudaDeviceProp::name spells it
  double bf16_tflops;          // dense bf16/fp16 tensor-core peak, the vendor's data sheet
};

// The MFU convention of PaLM / torchtitan: against the data-sheet peak, not a measured GEMM
// ceiling (shared/bench's mfu_vs_790 uses H200's measured ~790; lf-train's bench line too).
// Longest names first: "H100 PCIe" before "H100".
constexpr std::array<GpuPeak, 9> kGpuPeaks{{{"H100 PCIe", 756.0},
                                            {"H100", 989.4},
                                            {"H200", 989.4},
                                            {"H800", 989.4},
                                            {"GH200", 989.4},
                                            {"B200", 2250.0},
                                            {"A100", 312.0},
                                            {"L40S", 362.1},
                                            {"A10G", 70.0}}};

std::string cuda_name(const c10::Device& device) {
#ifdef LF_WITH_CUDA
  cudaDeviceProp prop{};
  if (device.is_cuda() && cudaGetDeviceProperties(&prop, device.index()) == cudaSuccess) return prop.name;
#endif
  return device.str();
}

}  // namespace

double peak_flops_per_s(const c10::Device& device, c10::ScalarType compute_dtype, std::optional<double> tflops) {
  if (tflops && *tflops > 0) return *tflops * 1e12;
  const std::string name = cuda_name(device);
  const bool half = compute_dtype == c10::kBFloat16 || compute_dtype == c10::kHalf;
  if (device.is_cuda() && half)
    for (const auto& g : kGpuPeaks)
      if (name.find(g.name_part) != std::string::npos) return g.bf16_tflops * 1e12;
  if (device.is_cuda())  // a CPU run has no MFU to speak of: silent there
    spdlog::info("lf_train_mfu is not reported: no peak FLOP/s known for {} computing in {}; set LF_PEAK_TFLOPS "
                 "(dense TFLOP/s) to report it",
                 name, c10::toString(compute_dtype));
  return 0;
}

}  // namespace lf::train
