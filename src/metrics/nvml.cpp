#include "lf/metrics/nvml.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstring>

namespace lf::metrics {

namespace {

// NVML's ABI, as nvml.h declares it (stable since the _v2 entry points, CUDA 5+).
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
using nvmlEventSet_t = struct nvmlEventSet_st*;
constexpr nvmlReturn_t kSuccess = 0;
constexpr int kTemperatureGpu = 0;
constexpr int kClockSm = 1, kClockMem = 2;
constexpr int kPcieTxBytes = 0, kPcieRxBytes = 1;
constexpr unsigned long long kEventXidCritical = 0x8;
constexpr unsigned kFieldNvlinkDataTx = 138, kFieldNvlinkDataRx = 139;  // cumulative KiB, all links

struct Utilization {
  unsigned gpu, memory;
};
struct Memory {
  unsigned long long total, free, used;
};
// nvmlMemory_v2_t: `used` without the driver's reserved memory, as nvidia-smi (R510+) and DCGM's
// FB_USED report it; v1's `used` counts the reservation (~600 MiB on an idle H200).
struct MemoryV2 {
  unsigned version;
  unsigned long long total, reserved, free, used;
};
constexpr unsigned kMemoryV2Version = static_cast<unsigned>(sizeof(MemoryV2)) | (2u << 24);
struct PciInfo {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
struct EventData {
  nvmlDevice_t device;
  unsigned long long event_type, event_data;
  unsigned gpu_instance_id, compute_instance_id;
};
union Value {
  double d;
  unsigned ui;
  unsigned long ul;
  unsigned long long ull;
  long long sll;
};
struct FieldValue {
  unsigned field_id, scope_id;
  long long timestamp, latency_usec;
  int value_type;
  nvmlReturn_t nvml_return;
  Value value;
};
static_assert(sizeof(FieldValue) == 40, "nvmlFieldValue_t layout");

double field_as_double(const FieldValue& f) {
  switch (f.value_type) {
    case 0: return f.value.d;
    case 1: return f.value.ui;
    case 2: return static_cast<double>(f.value.ul);
    case 3: return static_cast<double>(f.value.ull);
    case 4: return static_cast<double>(f.value.sll);
    default: return static_cast<double>(f.value.ui);
  }
}

}  // namespace

struct Nvml::Api {
  void* handle = nullptr;
#define LF_NVML_FN(name, ...) nvmlReturn_t (*name)(__VA_ARGS__) = nullptr;
  LF_NVML_FN(nvmlInit_v2)
  LF_NVML_FN(nvmlShutdown)
  LF_NVML_FN(nvmlDeviceGetCount_v2, unsigned*)
  LF_NVML_FN(nvmlDeviceGetHandleByIndex_v2, unsigned, nvmlDevice_t*)
  LF_NVML_FN(nvmlDeviceGetUUID, nvmlDevice_t, char*, unsigned)
  LF_NVML_FN(nvmlDeviceGetName, nvmlDevice_t, char*, unsigned)
  LF_NVML_FN(nvmlDeviceGetPciInfo_v3, nvmlDevice_t, PciInfo*)
  LF_NVML_FN(nvmlDeviceGetUtilizationRates, nvmlDevice_t, Utilization*)
  LF_NVML_FN(nvmlDeviceGetMemoryInfo, nvmlDevice_t, Memory*)
  LF_NVML_FN(nvmlDeviceGetMemoryInfo_v2, nvmlDevice_t, MemoryV2*)
  LF_NVML_FN(nvmlDeviceGetTemperature, nvmlDevice_t, int, unsigned*)
  LF_NVML_FN(nvmlDeviceGetPowerUsage, nvmlDevice_t, unsigned*)
  LF_NVML_FN(nvmlDeviceGetTotalEnergyConsumption, nvmlDevice_t, unsigned long long*)
  LF_NVML_FN(nvmlDeviceGetClockInfo, nvmlDevice_t, int, unsigned*)
  LF_NVML_FN(nvmlDeviceGetPcieThroughput, nvmlDevice_t, int, unsigned*)
  LF_NVML_FN(nvmlDeviceGetPcieReplayCounter, nvmlDevice_t, unsigned*)
  LF_NVML_FN(nvmlDeviceGetFieldValues, nvmlDevice_t, int, FieldValue*)
  LF_NVML_FN(nvmlSystemGetDriverVersion, char*, unsigned)
  LF_NVML_FN(nvmlSystemGetCudaDriverVersion, int*)
  LF_NVML_FN(nvmlEventSetCreate, nvmlEventSet_t*)
  LF_NVML_FN(nvmlEventSetFree, nvmlEventSet_t)
  LF_NVML_FN(nvmlDeviceRegisterEvents, nvmlDevice_t, unsigned long long, nvmlEventSet_t)
  LF_NVML_FN(nvmlEventSetWait_v2, nvmlEventSet_t, EventData*, unsigned)
#undef LF_NVML_FN
  const char* (*nvmlErrorString)(nvmlReturn_t) = nullptr;

  template <typename F>
  void bind(F& fn, const char* name) {
    fn = reinterpret_cast<F>(::dlsym(handle, name));
  }
  std::string error(nvmlReturn_t r) const {
    return nvmlErrorString ? fmt::format("{} (NVML error {})", nvmlErrorString(r), r) : fmt::format("NVML error {}", r);
  }
  nvmlDevice_t device(unsigned i) const {
    nvmlDevice_t d = nullptr;
    return nvmlDeviceGetHandleByIndex_v2(i, &d) == kSuccess ? d : nullptr;
  }
};

std::unique_ptr<Nvml> Nvml::open(std::string* why, const std::string& library) {
  auto fail = [&](std::string reason) -> std::unique_ptr<Nvml> {
    if (why) *why = std::move(reason);
    return nullptr;
  };
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return fail(fmt::format("{} not loadable ({}): no NVIDIA driver on this machine?", library, ::dlerror()));
  std::unique_ptr<Nvml> n(new Nvml);
  n->api_ = std::make_unique<Api>();
  Api& a = *n->api_;
  a.handle = handle;
#define LF_BIND(name) a.bind(a.name, #name)
  LF_BIND(nvmlInit_v2);
  LF_BIND(nvmlShutdown);
  LF_BIND(nvmlDeviceGetCount_v2);
  LF_BIND(nvmlDeviceGetHandleByIndex_v2);
  LF_BIND(nvmlDeviceGetUUID);
  LF_BIND(nvmlDeviceGetName);
  LF_BIND(nvmlDeviceGetPciInfo_v3);
  LF_BIND(nvmlDeviceGetUtilizationRates);
  LF_BIND(nvmlDeviceGetMemoryInfo);
  LF_BIND(nvmlDeviceGetMemoryInfo_v2);  // absent before driver R510: v1 then
  LF_BIND(nvmlDeviceGetTemperature);
  LF_BIND(nvmlDeviceGetPowerUsage);
  LF_BIND(nvmlDeviceGetTotalEnergyConsumption);
  LF_BIND(nvmlDeviceGetClockInfo);
  LF_BIND(nvmlDeviceGetPcieThroughput);
  LF_BIND(nvmlDeviceGetPcieReplayCounter);
  LF_BIND(nvmlDeviceGetFieldValues);
  LF_BIND(nvmlSystemGetDriverVersion);
  LF_BIND(nvmlSystemGetCudaDriverVersion);
  LF_BIND(nvmlEventSetCreate);
  LF_BIND(nvmlEventSetFree);
  LF_BIND(nvmlDeviceRegisterEvents);
  LF_BIND(nvmlEventSetWait_v2);
  LF_BIND(nvmlErrorString);
#undef LF_BIND
  // The calls every sample needs; the others are optional (older drivers, some GPUs).
  if (!a.nvmlInit_v2 || !a.nvmlShutdown || !a.nvmlDeviceGetCount_v2 || !a.nvmlDeviceGetHandleByIndex_v2 ||
      !a.nvmlDeviceGetUUID || !a.nvmlDeviceGetName || !a.nvmlDeviceGetMemoryInfo) {
    ::dlclose(handle);
    n->api_->handle = nullptr;
    return fail(fmt::format("{} lacks NVML's entry points (nvmlInit_v2, ...): not NVIDIA's library?", library));
  }
  if (const nvmlReturn_t r = a.nvmlInit_v2(); r != kSuccess) {
    const std::string e = a.error(r);
    ::dlclose(handle);
    n->api_->handle = nullptr;
    return fail(fmt::format("nvmlInit failed: {}", e));
  }
  const unsigned count = n->device_count();
  n->xid_counts_.assign(count, 0);
  n->last_xid_.assign(count, std::nullopt);
  // XID events need the driver's permission (containers often lack it): without them the
  // XID series are absent, the rest works.
  if (a.nvmlEventSetCreate && a.nvmlDeviceRegisterEvents && a.nvmlEventSetWait_v2) {
    nvmlEventSet_t set = nullptr;
    if (a.nvmlEventSetCreate(&set) == kSuccess) {
      bool any = false;
      for (unsigned i = 0; i < count; ++i)
        if (auto d = a.device(i)) any = a.nvmlDeviceRegisterEvents(d, kEventXidCritical, set) == kSuccess || any;
      if (any) n->xid_events_ = set;
      else if (a.nvmlEventSetFree) a.nvmlEventSetFree(set);
    }
  }
  return n;
}

Nvml::~Nvml() {
  if (!api_ || !api_->handle) return;
  if (xid_events_ && api_->nvmlEventSetFree) api_->nvmlEventSetFree(static_cast<nvmlEventSet_t>(xid_events_));
  api_->nvmlShutdown();
  ::dlclose(api_->handle);
}

unsigned Nvml::device_count() const {
  unsigned n = 0;
  return api_->nvmlDeviceGetCount_v2(&n) == kSuccess ? n : 0;
}

std::string Nvml::driver_version() const {
  char buf[96] = {};
  if (!api_->nvmlSystemGetDriverVersion || api_->nvmlSystemGetDriverVersion(buf, sizeof(buf)) != kSuccess) return "";
  return buf;
}

int Nvml::cuda_driver_version() const {
  int v = 0;
  if (!api_->nvmlSystemGetCudaDriverVersion || api_->nvmlSystemGetCudaDriverVersion(&v) != kSuccess) return 0;
  return v;
}

std::vector<GpuSample> Nvml::identify() const {
  std::vector<GpuSample> out;
  const Api& a = *api_;
  for (unsigned i = 0, n = device_count(); i < n; ++i) {
    nvmlDevice_t d = a.device(i);
    if (!d) continue;
    GpuSample s;
    s.index = i;
    char buf[128] = {};
    if (a.nvmlDeviceGetUUID(d, buf, sizeof(buf)) == kSuccess) s.uuid = buf;
    std::memset(buf, 0, sizeof(buf));
    if (a.nvmlDeviceGetName(d, buf, sizeof(buf)) == kSuccess) s.name = buf;
    PciInfo pci{};
    if (a.nvmlDeviceGetPciInfo_v3 && a.nvmlDeviceGetPciInfo_v3(d, &pci) == kSuccess) s.pci_bus_id = pci.bus_id;
    MemoryV2 m2{};
    m2.version = kMemoryV2Version;
    Memory m{};
    if (a.nvmlDeviceGetMemoryInfo_v2 && a.nvmlDeviceGetMemoryInfo_v2(d, &m2) == kSuccess) {
      s.memory_total_bytes = static_cast<double>(m2.total);
      s.memory_free_bytes = static_cast<double>(m2.free);
      s.memory_used_bytes = static_cast<double>(m2.used);
    } else if (a.nvmlDeviceGetMemoryInfo(d, &m) == kSuccess) {
      s.memory_total_bytes = static_cast<double>(m.total);
      s.memory_free_bytes = static_cast<double>(m.free);
      s.memory_used_bytes = static_cast<double>(m.used);
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<GpuSample> Nvml::sample() {
  const Api& a = *api_;
  // Drain the XID queue first (a wait of 0 ms only polls).
  if (xid_events_) {
    EventData e{};
    while (a.nvmlEventSetWait_v2(static_cast<nvmlEventSet_t>(xid_events_), &e, 0) == kSuccess) {
      for (unsigned i = 0; i < xid_counts_.size(); ++i)
        if (a.device(i) == e.device) {
          ++xid_counts_[i];
          last_xid_[i] = static_cast<unsigned>(e.event_data);
        }
    }
  }
  std::vector<GpuSample> out = identify();
  for (GpuSample& s : out) {
    nvmlDevice_t d = a.device(s.index);
    unsigned u = 0;
    unsigned long long ull = 0;
    Utilization util{};
    if (a.nvmlDeviceGetUtilizationRates && a.nvmlDeviceGetUtilizationRates(d, &util) == kSuccess) {
      s.utilization_ratio = util.gpu / 100.0;
      s.memory_copy_utilization_ratio = util.memory / 100.0;
    }
    if (a.nvmlDeviceGetTemperature && a.nvmlDeviceGetTemperature(d, kTemperatureGpu, &u) == kSuccess)
      s.temperature_celsius = u;
    if (a.nvmlDeviceGetPowerUsage && a.nvmlDeviceGetPowerUsage(d, &u) == kSuccess) s.power_watts = u / 1000.0;
    if (a.nvmlDeviceGetTotalEnergyConsumption && a.nvmlDeviceGetTotalEnergyConsumption(d, &ull) == kSuccess)
      s.energy_joules = static_cast<double>(ull) / 1000.0;
    if (a.nvmlDeviceGetClockInfo && a.nvmlDeviceGetClockInfo(d, kClockSm, &u) == kSuccess) s.sm_clock_hertz = u * 1e6;
    if (a.nvmlDeviceGetClockInfo && a.nvmlDeviceGetClockInfo(d, kClockMem, &u) == kSuccess)
      s.memory_clock_hertz = u * 1e6;
    if (a.nvmlDeviceGetPcieThroughput && a.nvmlDeviceGetPcieThroughput(d, kPcieTxBytes, &u) == kSuccess)
      s.pcie_tx_bytes_per_second = u * 1024.0;  // NVML: KB/s
    if (a.nvmlDeviceGetPcieThroughput && a.nvmlDeviceGetPcieThroughput(d, kPcieRxBytes, &u) == kSuccess)
      s.pcie_rx_bytes_per_second = u * 1024.0;
    if (a.nvmlDeviceGetPcieReplayCounter && a.nvmlDeviceGetPcieReplayCounter(d, &u) == kSuccess) s.pcie_replays = u;
    if (a.nvmlDeviceGetFieldValues) {
      FieldValue f[2] = {};
      f[0].field_id = kFieldNvlinkDataTx;
      f[1].field_id = kFieldNvlinkDataRx;
      if (a.nvmlDeviceGetFieldValues(d, 2, f) == kSuccess) {
        if (f[0].nvml_return == kSuccess) s.nvlink_tx_bytes = field_as_double(f[0]) * 1024.0;
        if (f[1].nvml_return == kSuccess) s.nvlink_rx_bytes = field_as_double(f[1]) * 1024.0;
      }
    }
    if (xid_events_ && s.index < xid_counts_.size()) {
      s.xid_errors = xid_counts_[s.index];
      s.last_xid = last_xid_[s.index];
    }
  }
  return out;
}

}  // namespace lf::metrics
