#pragma once
// The per-GPU lf_gpu_* families, named after NVIDIA's DCGM exporter fields but in
// Prometheus base units (ratios, bytes, seconds, hertz, joules), so DCGM dashboards map
// one to one (README "Metrics" has the table):
//   DCGM_FI_DEV_GPU_UTIL (%)            lf_gpu_utilization_ratio
//   DCGM_FI_DEV_MEM_COPY_UTIL (%)       lf_gpu_memory_copy_utilization_ratio
//   DCGM_FI_DEV_FB_USED / FREE (MiB)    lf_gpu_memory_used_bytes / lf_gpu_memory_free_bytes
//   (FB_USED + FB_FREE + reserved)      lf_gpu_memory_total_bytes
//   DCGM_FI_DEV_GPU_TEMP (C)            lf_gpu_temperature_celsius
//   DCGM_FI_DEV_POWER_USAGE (W)         lf_gpu_power_watts
//   DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (mJ)  lf_gpu_energy_joules_total
//   DCGM_FI_DEV_SM_CLOCK / MEM_CLOCK (MHz)     lf_gpu_sm_clock_hertz / lf_gpu_memory_clock_hertz
//   DCGM_FI_DEV_XID_ERRORS (last XID)   lf_gpu_last_xid, lf_gpu_xid_errors_total (count)
//   DCGM_FI_DEV_PCIE_REPLAY_COUNTER     lf_gpu_pcie_replays_total
//   DCGM_FI_PROF_PCIE_TX/RX_BYTES (B/s) lf_gpu_pcie_transmit/receive_bytes_per_second
//   DCGM_FI_PROF_NVLINK_TX/RX_BYTES     lf_gpu_nvlink_transmit/receive_bytes_total (counters)
// Labels: node, gpu (NVML index), uuid, model_name, pci_bus_id (DCGM: gpu, UUID,
// modelName, pci_bus_id). A family is written only when some GPU has the value.
#include <string>
#include <vector>

#include "lf/metrics/exposition.h"
#include "lf/metrics/nvml.h"

namespace lf::metrics {

void write_gpu_series(Exposition& e, const std::vector<GpuSample>& gpus, const std::string& node);

}  // namespace lf::metrics
