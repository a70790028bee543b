#pragma once
// NVIDIA's management library, loaded at run time (dlopen libnvidia-ml.so.1): lf-train never
// links it, so a machine without the driver runs the same binary and simply has no GPU
// series. Only the handful of calls the exporter and `lf-train doctor` need, declared here
// from NVML's documented ABI (nvml.h is not a build dependency).
// Threading: NVML is thread-safe; one Nvml object may be used from any thread, but
// sample() is meant for one sampler thread (it drains the XID event queue).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace lf::metrics {

// One GPU at one moment; a field NVML does not give on this GPU/driver stays empty.
struct GpuSample {
  unsigned index = 0;  // NVML's (and nvidia-smi's) numbering: PCI bus order
  std::string uuid, name, pci_bus_id;
  std::optional<double> utilization_ratio, memory_copy_utilization_ratio;  // 0..1
  std::optional<double> memory_used_bytes, memory_free_bytes, memory_total_bytes;
  std::optional<double> temperature_celsius, power_watts, energy_joules;
  std::optional<double> sm_clock_hertz, memory_clock_hertz;
  std::optional<double> pcie_tx_bytes_per_second, pcie_rx_bytes_per_second, pcie_replays;
  std::optional<double> nvlink_tx_bytes, nvlink_rx_bytes;  // cumulative, all links
  std::optional<uint64_t> xid_errors;                      // XID events seen since the exporter started
  std::optional<unsigned> last_xid;
};

class Nvml {
 public:
  // nullptr and `why` ("libnvidia-ml.so.1 not found: ...", "nvmlInit failed: ...") when
  // NVML cannot be used. `library` overrides the name (tests).
  static std::unique_ptr<Nvml> open(std::string* why, const std::string& library = "libnvidia-ml.so.1");
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  unsigned device_count() const;
  std::string driver_version() const;  // "550.54.15"; "" when unknown
  int cuda_driver_version() const;     // 12040 for CUDA 12.4; 0 when unknown
  // Every GPU now. Blocks ~20 ms per GPU (NVML samples PCIe throughput over a window):
  // call it from a thread of its own, never the io thread.
  std::vector<GpuSample> sample();
  // Names and UUIDs only (cheap; for doctor).
  std::vector<GpuSample> identify() const;

  struct Api;

 private:
  Nvml() = default;
  std::unique_ptr<Api> api_;
  void* xid_events_ = nullptr;  // nvmlEventSet_t; null when the driver does not allow XID events here
  std::vector<uint64_t> xid_counts_;
  std::vector<std::optional<unsigned>> last_xid_;
};

}  // namespace lf::metrics
