#include "lf/agent/status_reporter.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>

#include "lf/common/env_knobs.h"
#include "lf/common/heartbeat_line.h"
#include "lf/metrics/gpu_assignment.h"
#include "rank_fields.h"

namespace lf::agent {

namespace {

// A status stays well under the frame limit (4 MiB) whatever the workers print: the newest
// lines, each cut (the console and the log files keep them whole).
constexpr size_t kMaxLinesPerStatus = 1000;
constexpr size_t kMaxLineBytes = 1000;

double or_unknown(const std::optional<double>& v) { return v ? *v : -1; }

}  // namespace

rdzv::NodeStatusMsg node_status(WorkerGroup* group, int64_t generation, const std::vector<metrics::GpuSample>& gpus,
                                const std::string& gpu_note,
                                const std::vector<std::optional<unsigned>>& gpu_of_ordinal) {
  rdzv::NodeStatusMsg s;
  s.generation = generation;
  for (const auto& g : gpus) {
    rdzv::GpuStatus o;
    o.index = g.index;
    o.name = g.name;
    o.uuid = g.uuid;
    o.utilization = or_unknown(g.utilization_ratio);
    o.memory_used_bytes = or_unknown(g.memory_used_bytes);
    o.memory_total_bytes = or_unknown(g.memory_total_bytes);
    o.temperature_celsius = or_unknown(g.temperature_celsius);
    o.power_watts = or_unknown(g.power_watts);
    s.gpus.push_back(std::move(o));
  }
  if (gpus.empty()) s.gpu_note = gpu_note;
  if (!group) return s;
  for (const WorkerStatus& w : group->status()) {
    rdzv::RankStatus r;
    fill_rank_fields(r, w);
    if (w.exit) {
      r.exited = true;
      r.exit_code = w.exit->exit_code;
      r.signal = w.exit->signal;
    }
    if (!gpu_of_ordinal.empty()) {
      const auto idx = gpu_of_ordinal[static_cast<size_t>(w.local_rank) % gpu_of_ordinal.size()];
      if (idx) r.gpu = *idx;
    }
    r.last_line = w.last_line.substr(0, kMaxLineBytes);
    s.ranks.push_back(std::move(r));
    // Only global rank 0's beats draw the curves (loss, learning rate, grad norm are the job's);
    // the others' are drained so they do not pile up.
    for (auto& b : group->take_beats(w.global_rank))
      if (w.global_rank == 0) s.points.push_back({b.step, phase_name(b.phase), std::move(b.metrics_json)});
  }
  auto lines = group->take_lines();
  const size_t skip = lines.size() > kMaxLinesPerStatus ? lines.size() - kMaxLinesPerStatus : 0;
  for (size_t i = skip; i < lines.size(); ++i)
    s.lines.push_back({lines[i].global_rank, lines[i].err, lines[i].text.substr(0, kMaxLineBytes)});
  return s;
}

StatusReporter::StatusReporter(boost::asio::io_context& io, Send send)
    : io_(io), send_(std::move(send)), timer_(io) {}

StatusReporter::~StatusReporter() { stop(); }

void StatusReporter::begin(WorkerGroup* group, int64_t generation, int64_t interval_ms) {
  group_ = group;
  generation_ = generation;
  const bool was_off = interval_ms_ <= 0;
  interval_ms_ = interval_ms;
  if (interval_ms_ > 0 && was_off && !stopped_) tick();
}

void StatusReporter::send_now() {
  if (interval_ms_ <= 0 || stopped_) return;
  std::string note;
  auto samples = gpus(&note);
  std::vector<std::optional<unsigned>> ordinals;
  if (!samples.empty()) {
    // CUDA_VISIBLE_DEVICES="" is set (no GPU), unlike env_string's reading of "".
    const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
    const auto visible = metrics::parse_cuda_visible_devices(cvd ? std::optional<std::string>(cvd) : std::nullopt,
                                                             static_cast<int>(samples.size()), samples);
    ordinals = metrics::resolve_visible(visible, samples);
  }
  send_(node_status(group_, generation_, samples, note, ordinals));
}

void StatusReporter::tick() {
  if (stopped_ || interval_ms_ <= 0) return;
  send_now();
  timer_.expires_after(std::chrono::milliseconds(interval_ms_));
  timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) tick();
  });
}

std::vector<metrics::GpuSample> StatusReporter::gpus(std::string* note) {
  if (shared_) {
    *note = shared_->unavailable();
    return shared_->latest();
  }
  if (!own_) {
    own_ = std::make_unique<metrics::GpuSampler>(knob_number("LF_METRICS_GPU_INTERVAL_S").value_or(1),
                                                 knob_string("LF_NVML_LIBRARY").value_or("libnvidia-ml.so.1"));
    if (!own_->available()) spdlog::debug("node status: no GPU series on this node: {}", own_->unavailable());
  }
  *note = own_->unavailable();
  return own_->latest();
}

void StatusReporter::stop() {
  stopped_ = true;
  timer_.cancel();
  own_.reset();
}

}  // namespace lf::agent
