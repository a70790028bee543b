#include "job_health.h"

#include <fmt/format.h>

#include <cctype>

namespace lf::ui {

namespace {

constexpr size_t kKeptEvents = 50;

std::vector<std::unique_ptr<metrics::HealthRule>> rank_rules(const metrics::HealthThresholds& t) {
  std::vector<std::unique_ptr<metrics::HealthRule>> r;
  r.push_back(metrics::make_straggler_rule(t));
  r.push_back(metrics::make_heartbeat_gap_rule(t));
  return r;
}

std::vector<std::unique_ptr<metrics::HealthRule>> gpu_rules(const metrics::HealthThresholds& t) {
  std::vector<std::unique_ptr<metrics::HealthRule>> r;
  r.push_back(metrics::make_gpu_temperature_rule(t));
  r.push_back(metrics::make_gpu_memory_growth_rule(t));
  return r;
}

std::optional<double> known(double v) { return v >= 0 ? std::optional<double>(v) : std::nullopt; }

metrics::GpuSample sample_of(const rdzv::GpuStatus& g) {
  metrics::GpuSample s;
  s.index = static_cast<unsigned>(g.index);
  s.name = g.name;
  s.uuid = g.uuid;
  s.utilization_ratio = known(g.utilization);
  s.memory_used_bytes = known(g.memory_used_bytes);
  s.memory_total_bytes = known(g.memory_total_bytes);
  s.temperature_celsius = known(g.temperature_celsius);
  s.power_watts = known(g.power_watts);
  return s;
}

metrics::RankReport report_of(const rdzv::RankStatus& r, double age_s) {
  metrics::RankReport o;
  o.rank = static_cast<int>(r.rank);
  o.local_rank = static_cast<int>(r.local_rank);
  o.pid = r.pid;
  o.alive = r.alive;
  o.heard = r.heard;
  o.progress = r.progress;
  o.phase = r.phase;
  o.step = r.step;
  o.metrics_json = r.metrics_json;
  o.since_beat_s = r.since_beat_s + age_s;
  o.since_progress_s = r.since_progress_s + age_s;
  return o;
}

}  // namespace

JobHealth::JobHealth(metrics::HealthThresholds t) : t_(t), rank_rules_(t, rank_rules(t)) {}

void JobHealth::check(const rdzv::JobRecord& record, metrics::HealthClock::time_point now, double wall_now) {
  std::vector<metrics::RankReport> all;
  std::map<int, std::string> places;
  for (const auto& [node, n] : record.nodes()) {
    if (!n.status) continue;
    // A lost node's ranks are not silent workers: the failure names them already.
    if (!n.connected) continue;
    const double age = std::chrono::duration<double>(now - n.status_at).count();
    std::vector<metrics::GpuSample> gpus;
    for (const auto& g : n.status->gpus) gpus.push_back(sample_of(g));
    std::vector<metrics::RankReport> local;
    std::vector<std::optional<unsigned>> gpu_of_ordinal;
    for (const auto& r : n.status->ranks) {
      local.push_back(report_of(r, age));
      all.push_back(local.back());
      const auto lr = static_cast<size_t>(std::max<int64_t>(0, r.local_rank));
      if (gpu_of_ordinal.size() <= lr) gpu_of_ordinal.resize(lr + 1);
      if (r.gpu >= 0) gpu_of_ordinal[lr] = static_cast<unsigned>(r.gpu);
      const std::string gpu = r.gpu >= 0 ? fmt::format("GPU {}", r.gpu) : std::string("no GPU");
      places[static_cast<int>(r.rank)] = fmt::format("node {} ({}), {}", node, n.hostname, gpu);
    }
    if (gpus.empty()) continue;
    auto& series = node_ranks_[node];
    series.update(local, wall_now);
    auto& monitor = gpu_rules_[node];
    if (!monitor) monitor = std::make_unique<metrics::HealthMonitor>(t_, gpu_rules(t_));
    metrics::HealthInput in;
    in.now = now;
    in.node = fmt::format("node {} ({})", node, n.hostname);
    in.gpus = &gpus;
    in.gpu_of_ordinal = gpu_of_ordinal;
    in.ranks = &series.ranks();
    take(monitor->check(in), node, wall_now);
  }
  all_ranks_.update(all, wall_now);
  metrics::HealthInput in;
  in.now = now;
  in.node = "the job";
  in.ranks = &all_ranks_.ranks();
  in.places = &places;
  take(rank_rules_.check(in), -1, wall_now);
}

void JobHealth::take(const std::vector<metrics::HealthEvent>& events, int64_t node, double wall_now) {
  for (const auto& e : events) {
    const std::string key = node >= 0 ? fmt::format("n{}:{}", node, e.key) : e.key;
    if (e.warning) {
      auto [it, fresh] = active_.try_emplace(key, Active{e.line, node, wall_now});
      if (!fresh) it->second.line = e.line;
    } else {
      active_.erase(key);
    }
    events_.push_back({{"t", wall_now}, {"warning", e.warning}, {"line", e.line}, {"key", key}});
    if (events_.size() > kKeptEvents) events_.pop_front();
  }
}

std::set<int64_t> JobHealth::flagged_ranks() const {
  std::set<int64_t> out;
  for (const auto& [key, a] : active_) {
    for (const char* prefix : {"straggler:", "beat:"}) {
      const std::string p = prefix;
      if (key.rfind(p, 0) == 0 && key.size() > p.size() && std::isdigit(static_cast<unsigned char>(key[p.size()])))
        out.insert(std::stoll(key.substr(p.size())));
    }
  }
  return out;
}

std::set<std::string> JobHealth::flagged_gpus() const {
  std::set<std::string> out;
  for (const auto& [key, a] : active_) {
    // "n1:temp:3" -> "1:3"
    const auto first = key.find(':'), last = key.rfind(':');
    if (key.rfind('n', 0) != 0 || first == std::string::npos || last == first) continue;
    out.insert(key.substr(1, first - 1) + ":" + key.substr(last + 1));
  }
  return out;
}

nlohmann::json JobHealth::to_json() const {
  nlohmann::json active = nlohmann::json::array();
  for (const auto& [key, a] : active_) active.push_back({{"key", key}, {"line", a.line}, {"node", a.node}, {"since", a.since}});
  nlohmann::json events = nlohmann::json::array();
  for (const auto& e : events_) events.push_back(e);
  return {{"active", active}, {"events", events}};
}

}  // namespace lf::ui
