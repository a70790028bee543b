// GPUs: what the driver shows (NVML, else libcuda, else /proc), what CUDA_VISIBLE_DEVICES
// leaves visible (parsed as CUDA parses it), whether NPROC_PER_NODE fits, and the driver,
// CUDA and NCCL versions the nodes must agree on.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <filesystem>
#include <map>

#include "lf/doctor/doctor.h"
#include "lf/doctor/driver_versions.h"
#include "lf/metrics/gpu_assignment.h"
#include "lf/metrics/nvml.h"

namespace lf::doctor {

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

int proc_gpu_count(const std::string& proc_root) {
  int n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(proc_root + "/driver/nvidia/gpus", ec);
       !ec && it != std::filesystem::end(it); it.increment(ec))
    ++n;
  return n;
}

void check_visible(const DoctorContext& ctx, Report& report, NodeFacts& facts,
                   const std::vector<metrics::GpuSample>& gpus, int driver_gpus) {
  const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  const auto visible = metrics::parse_cuda_visible_devices(cvd ? std::optional<std::string>(cvd) : std::nullopt,
                                                           driver_gpus, gpus);
  const int n_visible = visible.set ? static_cast<int>(visible.entries.size()) : driver_gpus;
  const bool hide_all = cvd && (std::string(cvd).empty() || std::string(cvd) == "-1");  // on purpose
  if (visible.set && !visible.stopped_at.empty() && !hide_all)
    report.warn("cuda-visible",
                fmt::format("CUDA_VISIBLE_DEVICES={}: CUDA stops at '{}' ({}), so only {} GPU(s) are visible{}", cvd,
                            visible.stopped_at, visible.why_stopped, n_visible,
                            visible.entries.empty() ? "" : fmt::format(": {}", fmt::join(visible.entries, ","))),
                "list only existing GPUs, by index (0..N-1) or by UUID (nvidia-smi -L), each once");
  else if (visible.set)
    report.pass("cuda-visible", fmt::format("CUDA_VISIBLE_DEVICES={}: {} GPU(s) visible", cvd, n_visible));
  facts.gpu_count = n_visible;
  // What the workers' GPUs have free: the predicted memory per rank is compared with it.
  const auto ordinals = metrics::resolve_visible(visible, gpus);
  double least_free = 0;
  for (size_t i = 0; i < ordinals.size(); ++i)
    for (const auto& g : gpus)
      if (ordinals[i] && g.index == *ordinals[i] && g.memory_free_bytes &&
          (least_free == 0 || *g.memory_free_bytes < least_free))
        least_free = *g.memory_free_bytes;
  facts.free_gpu_memory_bytes = least_free;

  if (n_visible == 0) {
    report.info("gpus", driver_gpus == 0 ? "no NVIDIA GPU on this node: the job runs on CPU (lf-train's TCP backend)"
                                         : fmt::format("{} GPU(s) here but none visible: the job runs on CPU",
                                                       driver_gpus));
    return;
  }
  const int64_t workers = ctx.nproc_given ? ctx.nproc : n_visible;
  if (workers > n_visible)
    report.fail("nproc", fmt::format("NPROC_PER_NODE={} workers but only {} visible GPU(s)", workers, n_visible),
                fmt::format("set NPROC_PER_NODE={} (one worker per GPU) or make more GPUs visible", n_visible));
  else if (workers < n_visible)
    report.warn("nproc", fmt::format("NPROC_PER_NODE={} workers for {} visible GPU(s): {} GPU(s) stay idle", workers,
                                     n_visible, n_visible - workers),
                "unset NPROC_PER_NODE (one worker per visible GPU) unless that is what you want");
  else
    report.pass("nproc", fmt::format("{} worker(s), one per visible GPU", workers));
  facts.nproc = workers;
}

}  // namespace

void check_gpus(const DoctorContext& ctx, Report& report, NodeFacts& facts) {
  std::string nvml_why;
  auto nvml = metrics::Nvml::open(&nvml_why, ctx.nvml_library);
  std::vector<metrics::GpuSample> gpus;
  int driver_gpus = proc_gpu_count(ctx.proc_root);
  if (nvml) {
    gpus = nvml->identify();
    driver_gpus = static_cast<int>(gpus.size());
    facts.driver_version = nvml->driver_version();
    facts.cuda_version = cuda_version_text(nvml->cuda_driver_version());
    std::vector<std::string> lines;
    for (const auto& g : gpus) {
      facts.gpu_models.push_back(g.name);
      lines.push_back(fmt::format("{} {} ({}, {:.0f}/{:.0f} GiB free)", g.index, g.name, g.uuid,
                                  g.memory_free_bytes.value_or(0) / kGiB, g.memory_total_bytes.value_or(0) / kGiB));
    }
    report.pass("gpus", fmt::format("{} GPU(s): {}", gpus.size(), fmt::join(lines, "; ")));
  } else if (driver_gpus > 0) {
    report.warn("nvml", fmt::format("{} GPU(s) in /proc/driver/nvidia but NVML is not usable: {}", driver_gpus, nvml_why),
                "install the driver's libnvidia-ml.so.1 (nvidia-utils) or set LF_NVML_LIBRARY; GPU metrics and "
                "memory checks need it");
  }
  if (facts.driver_version.empty()) facts.driver_version = kernel_driver_version(ctx.proc_root);
  if (facts.cuda_version.empty() && driver_gpus > 0) {
    const auto cuda = cuda_driver_info(ctx.cuda_library);
    facts.cuda_version = cuda_version_text(cuda.version);
    if (cuda.version == 0)
      report.warn("cuda", fmt::format("no CUDA driver version: {}", cuda.error),
                  "the NVIDIA driver's libcuda.so.1 must be loadable by lf-worker (LD_LIBRARY_PATH, or the container's "
                  "--gpus / nvidia-container-toolkit)");
  }
  check_visible(ctx, report, facts, gpus, driver_gpus);
  if (driver_gpus == 0) return;
  std::string nccl_why;
  if (const auto v = nccl_version(ctx.nccl_library, &nccl_why)) facts.nccl_version = *v;
  report.info("versions", fmt::format("driver {}, CUDA {}, NCCL {}", facts.driver_version.empty() ? "?" : facts.driver_version,
                                      facts.cuda_version.empty() ? "?" : facts.cuda_version,
                                      facts.nccl_version.empty() ? "? (" + nccl_why + "; set LF_NCCL_LIBRARY to torch's "
                                                                   "libnccl.so.2 to compare it)"
                                                                 : facts.nccl_version));
  std::map<std::string, int> models;
  for (const auto& m : facts.gpu_models) ++models[m];
  if (models.size() > 1)
    report.warn("gpu-models", fmt::format("mixed GPU models on this node: {}", fmt::join(facts.gpu_models, ", ")),
                "data parallel runs at the pace of the slowest GPU: use CUDA_VISIBLE_DEVICES to pick identical ones");
}

}  // namespace lf::doctor
