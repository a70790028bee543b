#include "lf/metrics/gpu_series.h"

#include <optional>

namespace lf::metrics {

namespace {

Labels gpu_labels(const GpuSample& g, const std::string& node) {
  return {{"node", node},
          {"gpu", std::to_string(g.index)},
          {"uuid", g.uuid},
          {"model_name", g.name},
          {"pci_bus_id", g.pci_bus_id}};
}

template <typename T>
void family(Exposition& e, const std::vector<GpuSample>& gpus, const std::string& node, const char* name,
            MetricType type, const char* help, std::optional<T> GpuSample::*field) {
  bool any = false;
  for (const auto& g : gpus) any = any || (g.*field).has_value();
  if (!any) return;
  e.family(name, type, help);
  for (const auto& g : gpus)
    if (const auto v = g.*field) e.sample(gpu_labels(g, node), static_cast<double>(*v));
}

}  // namespace

void write_gpu_series(Exposition& e, const std::vector<GpuSample>& gpus, const std::string& node) {
  using T = MetricType;
  family(e, gpus, node, "lf_gpu_utilization_ratio", T::kGauge,
         "Fraction of the last sample period a kernel ran (DCGM_FI_DEV_GPU_UTIL / 100)", &GpuSample::utilization_ratio);
  family(e, gpus, node, "lf_gpu_memory_copy_utilization_ratio", T::kGauge,
         "Fraction of time the memory was read or written (DCGM_FI_DEV_MEM_COPY_UTIL / 100)",
         &GpuSample::memory_copy_utilization_ratio);
  family(e, gpus, node, "lf_gpu_memory_used_bytes", T::kGauge, "Framebuffer memory used (DCGM_FI_DEV_FB_USED)",
         &GpuSample::memory_used_bytes);
  family(e, gpus, node, "lf_gpu_memory_free_bytes", T::kGauge, "Framebuffer memory free (DCGM_FI_DEV_FB_FREE)",
         &GpuSample::memory_free_bytes);
  family(e, gpus, node, "lf_gpu_memory_total_bytes", T::kGauge, "Framebuffer memory in total",
         &GpuSample::memory_total_bytes);
  family(e, gpus, node, "lf_gpu_temperature_celsius", T::kGauge, "GPU temperature (DCGM_FI_DEV_GPU_TEMP)",
         &GpuSample::temperature_celsius);
  family(e, gpus, node, "lf_gpu_power_watts", T::kGauge, "Power draw (DCGM_FI_DEV_POWER_USAGE)",
         &GpuSample::power_watts);
  family(e, gpus, node, "lf_gpu_energy_joules_total", T::kCounter,
         "Energy since the driver loaded (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION)", &GpuSample::energy_joules);
  family(e, gpus, node, "lf_gpu_sm_clock_hertz", T::kGauge, "SM clock (DCGM_FI_DEV_SM_CLOCK)",
         &GpuSample::sm_clock_hertz);
  family(e, gpus, node, "lf_gpu_memory_clock_hertz", T::kGauge, "Memory clock (DCGM_FI_DEV_MEM_CLOCK)",
         &GpuSample::memory_clock_hertz);
  family(e, gpus, node, "lf_gpu_pcie_transmit_bytes_per_second", T::kGauge,
         "PCIe bytes sent per second, NVML's 20 ms window (DCGM_FI_PROF_PCIE_TX_BYTES)",
         &GpuSample::pcie_tx_bytes_per_second);
  family(e, gpus, node, "lf_gpu_pcie_receive_bytes_per_second", T::kGauge,
         "PCIe bytes received per second, NVML's 20 ms window (DCGM_FI_PROF_PCIE_RX_BYTES)",
         &GpuSample::pcie_rx_bytes_per_second);
  family(e, gpus, node, "lf_gpu_pcie_replays_total", T::kCounter, "PCIe replays (DCGM_FI_DEV_PCIE_REPLAY_COUNTER)",
         &GpuSample::pcie_replays);
  family(e, gpus, node, "lf_gpu_nvlink_transmit_bytes_total", T::kCounter,
         "NVLink data bytes sent, all links (DCGM_FI_PROF_NVLINK_TX_BYTES as a counter)", &GpuSample::nvlink_tx_bytes);
  family(e, gpus, node, "lf_gpu_nvlink_receive_bytes_total", T::kCounter,
         "NVLink data bytes received, all links (DCGM_FI_PROF_NVLINK_RX_BYTES as a counter)",
         &GpuSample::nvlink_rx_bytes);
  family(e, gpus, node, "lf_gpu_xid_errors_total", T::kCounter,
         "Critical XID events since the agent started (DCGM_FI_DEV_XID_ERRORS counts them as its last value)",
         &GpuSample::xid_errors);
  family(e, gpus, node, "lf_gpu_last_xid", T::kGauge, "The last XID error code (DCGM_FI_DEV_XID_ERRORS)",
         &GpuSample::last_xid);
}

}  // namespace lf::metrics
