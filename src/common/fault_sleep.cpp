#include "lf/common/fault_sleep.h"

#include <charconv>
#include <cmath>
#include <string>

#include "lf/common/env.h"
#include "lf/common/env_knobs.h"
#include "lf/common/error.h"

namespace lf {

namespace {

constexpr const char* kForm = "PHASE:SECONDS[@RANK][,...] with PHASE one of loading, tokenizing, training, "
                              "evaluating, saving (e.g. LF_FAULT_SLEEP=saving:30@0)";

template <typename T>
bool parse_number(std::string_view s, T& out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

FaultSleep parse_entry(std::string_view e) {
  const auto colon = e.find(':');
  LF_CHECK(colon != std::string_view::npos, ConfigError, "LF_FAULT_SLEEP entry '{}' has no ':': expected {}", e, kForm);
  FaultSleep f;
  const auto phase = parse_phase(e.substr(0, colon));
  LF_CHECK(phase && *phase != WorkerPhase::kDone, ConfigError, "LF_FAULT_SLEEP entry '{}': unknown phase '{}': expected {}",
           e, e.substr(0, colon), kForm);
  f.phase = *phase;
  auto rest = e.substr(colon + 1);
  if (const auto at = rest.find('@'); at != std::string_view::npos) {
    LF_CHECK(parse_number(rest.substr(at + 1), f.rank) && f.rank >= 0, ConfigError,
             "LF_FAULT_SLEEP entry '{}': the rank after '@' must be a non-negative integer: expected {}", e, kForm);
    rest = rest.substr(0, at);
  }
  LF_CHECK(parse_number(rest, f.seconds) && std::isfinite(f.seconds) && f.seconds >= 0, ConfigError,
           "LF_FAULT_SLEEP entry '{}': '{}' is not a number of seconds >= 0: expected {}", e, rest, kForm);
  return f;
}

}  // namespace

std::vector<FaultSleep> parse_fault_sleep(std::string_view spec) {
  std::vector<FaultSleep> out;
  size_t start = 0;
  while (start <= spec.size()) {
    auto end = spec.find(',', start);
    if (end == std::string_view::npos) end = spec.size();
    const auto entry = spec.substr(start, end - start);
    if (!entry.empty()) out.push_back(parse_entry(entry));
    start = end + 1;
  }
  return out;
}

std::vector<FaultSleep> fault_sleeps_from_env(int rank) {
  const auto spec = knob_string("LF_FAULT_SLEEP");
  if (!spec) return {};
  std::vector<FaultSleep> mine;
  for (const auto& f : parse_fault_sleep(*spec))
    if (f.rank < 0 || f.rank == rank) mine.push_back(f);
  return mine;
}

}  // namespace lf
