#include "lf/metrics/gpu_assignment.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <set>
#include <sstream>

namespace lf::metrics {

namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// GPUs whose UUID starts with `prefix` (CUDA accepts a unique prefix).
std::vector<unsigned> uuid_matches(const std::string& prefix, const std::vector<GpuSample>& gpus) {
  std::vector<unsigned> out;
  for (const auto& g : gpus)
    if (g.uuid.rfind(prefix, 0) == 0) out.push_back(g.index);
  return out;
}

}  // namespace

VisibleDevices parse_cuda_visible_devices(const std::optional<std::string>& value, int gpu_count,
                                          const std::vector<GpuSample>& gpus) {
  VisibleDevices v;
  if (!value) return v;
  v.set = true;
  std::set<std::string> seen;
  std::stringstream ss(*value);
  std::string raw;
  auto stop = [&](const std::string& entry, std::string why) {
    v.stopped_at = entry;
    v.why_stopped = std::move(why);
  };
  while (std::getline(ss, raw, ',')) {
    const std::string e = trim(raw);
    if (e.empty() || e == "-1") {
      stop(e, e.empty() ? "an empty entry" : "-1 (hides this and every later GPU)");
      break;
    }
    std::string key = e;
    if (all_digits(e)) {
      const long idx = e.size() > 9 ? std::numeric_limits<long>::max() : std::stol(e);
      if (gpu_count >= 0 && idx >= gpu_count) {
        stop(e, fmt::format("index {} is out of range: this node has {} GPU(s), 0..{}", idx, gpu_count, gpu_count - 1));
        break;
      }
      key = std::to_string(idx);
    } else if (e.rfind("GPU-", 0) == 0 || e.rfind("MIG-", 0) == 0) {
      if (!gpus.empty() && e.rfind("GPU-", 0) == 0) {
        const auto m = uuid_matches(e, gpus);
        if (m.size() != 1) {
          stop(e, m.empty() ? "no GPU has this UUID" : "this UUID prefix matches several GPUs");
          break;
        }
        key = std::to_string(m[0]);
      }
    } else {
      stop(e, "not a device index or a GPU-/MIG- UUID");
      break;
    }
    if (!seen.insert(key).second) {
      stop(e, "a GPU listed twice");
      break;
    }
    v.entries.push_back(e);
  }
  return v;
}

std::vector<std::optional<unsigned>> resolve_visible(const VisibleDevices& v, const std::vector<GpuSample>& gpus) {
  std::vector<std::optional<unsigned>> out;
  if (!v.set) {
    for (const auto& g : gpus) out.emplace_back(g.index);
    return out;
  }
  for (const auto& e : v.entries) {
    if (all_digits(e)) {
      const unsigned idx = static_cast<unsigned>(std::stoul(e));
      out.emplace_back(idx < gpus.size() || gpus.empty() ? std::optional<unsigned>(idx) : std::nullopt);
    } else if (const auto m = uuid_matches(e, gpus); m.size() == 1) {
      out.emplace_back(m[0]);
    } else {
      out.emplace_back(std::nullopt);
    }
  }
  return out;
}

}  // namespace lf::metrics
