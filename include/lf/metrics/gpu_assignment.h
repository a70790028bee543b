#pragma once
// Which physical GPU a worker uses, without CUDA: CUDA_VISIBLE_DEVICES parsed as the CUDA
// driver parses it, then resolved against NVML's GPUs. lf-worker of local rank r uses
// CUDA ordinal r (mod the visible count).
// CUDA's rules: comma-separated entries, each a device index or a UUID ("GPU-8932f9..."; a
// unique prefix is enough; MIG-... names a MIG instance); the list ends at the first entry
// that is invalid (not a number or UUID, out of range, a repeat), silently: the devices
// after it are not visible. "" and "-1" hide every GPU. Unset: every GPU.
// Index entries count in CUDA's order, which equals NVML's (PCI bus) order when
// CUDA_DEVICE_ORDER=PCI_BUS_ID or all GPUs are the same model (the usual server).
#include <optional>
#include <string>
#include <vector>

#include "lf/metrics/nvml.h"

namespace lf::metrics {

struct VisibleDevices {
  bool set = false;                  // the variable exists
  std::vector<std::string> entries;  // the valid leading entries, trimmed
  std::string stopped_at;            // the entry that ended the list ("" when none did)
  std::string why_stopped;           // "not an index or a UUID", "index 9 out of range", ...
};

// gpu_count: how many GPUs exist (NVML or /proc), for the range check; < 0: unknown.
VisibleDevices parse_cuda_visible_devices(const std::optional<std::string>& value, int gpu_count,
                                          const std::vector<GpuSample>& gpus = {});

// The NVML index of each visible CUDA ordinal (nullopt: not resolvable, e.g. a MIG entry).
std::vector<std::optional<unsigned>> resolve_visible(const VisibleDevices& v, const std::vector<GpuSample>& gpus);

}  // namespace lf::metrics
