#include "lf/common/heartbeat_line.h"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <nlohmann/json.hpp>

namespace lf {

namespace {

using json = nlohmann::json;

constexpr std::array<std::pair<WorkerPhase, const char*>, 6> kPhases{{{WorkerPhase::kLoading, "loading"},
                                                                      {WorkerPhase::kTokenizing, "tokenizing"},
                                                                      {WorkerPhase::kTraining, "training"},
                                                                      {WorkerPhase::kEvaluating, "evaluating"},
                                                                      {WorkerPhase::kSaving, "saving"},
                                                                      {WorkerPhase::kDone, "done"}}};

HeartbeatLine alive_because(std::string problem) {
  HeartbeatLine h;
  h.problem = std::move(problem);
  return h;
}

// The fields of a {"kind":"progress"} object; a wrong one makes the line liveness only.
HeartbeatLine progress_from(const json& j) {
  const auto phase = j.find("phase");
  if (phase == j.end() || !phase->is_string()) return alive_because("progress beat without a \"phase\" string");
  const auto p = parse_phase(phase->get_ref<const std::string&>());
  if (!p) return alive_because(fmt::format("progress beat with an unknown phase '{}'", phase->get<std::string>()));
  HeartbeatLine h;
  h.kind = HeartbeatLine::Kind::kProgress;
  h.phase = *p;
  if (const auto s = j.find("step"); s != j.end()) {
    if (!s->is_number_integer()) return alive_because("progress beat whose \"step\" is not an integer");
    h.step = s->get<int64_t>();
  }
  if (const auto d = j.find("deadline_s"); d != j.end()) {
    if (!d->is_number() || !std::isfinite(d->get<double>()))
      return alive_because("progress beat whose \"deadline_s\" is not a number");
    h.deadline_s = d->get<double>();
  }
  const auto m = j.find("metrics");
  if (m != j.end() && !m->is_object()) return alive_because("progress beat whose \"metrics\" is not an object");
  h.metrics_json = m == j.end() ? "{}" : m->dump();
  return h;
}

}  // namespace

const char* phase_name(WorkerPhase phase) {
  for (const auto& [p, name] : kPhases)
    if (p == phase) return name;
  return "?";
}

std::optional<WorkerPhase> parse_phase(std::string_view name) {
  for (const auto& [p, n] : kPhases)
    if (name == n) return p;
  return std::nullopt;
}

HeartbeatLine parse_heartbeat_line(std::string_view line) {
  // Plain-text beats (any script's) are the common non-JSON case: no exception for those.
  const auto first = line.find_first_not_of(" \t\r");
  if (first == std::string_view::npos || line[first] != '{' || line.size() > kMaxHeartbeatLine) return {};
  const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return {};
  const auto kind = j.find("kind");
  if (kind == j.end() || *kind != "progress") return {};
  return progress_from(j);
}

std::string alive_line() { return "{\"v\":1,\"kind\":\"alive\"}\n"; }

std::string progress_line(WorkerPhase phase, int64_t step, double deadline_s, std::string_view metrics_json) {
  json j = {{"v", 1}, {"kind", "progress"}, {"phase", phase_name(phase)}, {"step", step},
            {"deadline_s", std::isfinite(deadline_s) ? deadline_s : 0.0}};
  json metrics = metrics_json.empty() ? json::object() : json::parse(metrics_json, nullptr, false);
  if (!metrics.is_object())
    metrics = {{"metrics_error", fmt::format("not a JSON object: {:.80}", std::string(metrics_json))}};
  j["metrics"] = std::move(metrics);
  // nlohmann writes NaN/inf (a diverging loss) as null; invalid UTF-8 is replaced, never thrown.
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace lf
