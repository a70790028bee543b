#include "lf/agent/worker_watch.h"

#include <fmt/format.h>

namespace lf::agent {

namespace {

double seconds(WorkerWatch::Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// What a worker stuck in `phase` is most likely waiting for.
const char* stuck_hint(WorkerPhase phase) {
  switch (phase) {
    case WorkerPhase::kTraining:
    case WorkerPhase::kEvaluating:
      return "a collective that never completes (a peer stopped or died?) or a deadlock";
    case WorkerPhase::kLoading:
      return "slow storage or a peer that never joined; raise LF_PROGRESS_LOAD_TIMEOUT_S if loading is this slow";
    case WorkerPhase::kTokenizing:
      return "raise LF_PROGRESS_TOKENIZE_TIMEOUT_S if tokenizing is this slow";
    case WorkerPhase::kSaving:
      return "slow or full storage; raise LF_PROGRESS_SAVE_TIMEOUT_S if saving is this slow";
    case WorkerPhase::kDone: return "exiting";
  }
  return "?";
}

}  // namespace

void WorkerWatch::feed(std::string_view bytes, Clock::time_point now) {
  if (bytes.empty()) return;
  heard_ = true;
  last_beat_ = now;  // any byte is liveness
  while (!bytes.empty()) {
    const auto nl = bytes.find('\n');
    const auto piece = bytes.substr(0, nl);
    if (!skipping_) {
      if (partial_.size() + piece.size() > kMaxHeartbeatLine) {
        skipping_ = true;  // a runaway line: liveness only, resynchronise at its end
        partial_.clear();
      } else {
        partial_.append(piece);
      }
    }
    if (nl == std::string_view::npos) return;
    if (!skipping_) on_line(partial_, now);
    partial_.clear();
    skipping_ = false;
    bytes.remove_prefix(nl + 1);
  }
}

void WorkerWatch::on_line(std::string_view line, Clock::time_point now) {
  auto h = parse_heartbeat_line(line);
  if (!h.problem.empty() && !problem_) problem_ = fmt::format("{} in: {:.200}", h.problem, std::string(line));
  if (h.kind != HeartbeatLine::Kind::kProgress) return;
  beats_.push_back({h.phase, h.step, h.metrics_json});
  if (beats_.size() > kKeptBeats) beats_.pop_front();
  progress_ = std::move(h);
  last_progress_ = now;
}

std::string WorkerWatch::last_progress(Clock::time_point now) const {
  if (!progress_) return "it never sent a progress beat";
  return fmt::format("last progress beat: phase {}, step {}, {:.1f} s ago", phase_name(progress_->phase),
                     progress_->step, seconds(now - last_progress_));
}

std::optional<std::string> WorkerWatch::overdue(Clock::time_point now) const {
  if (!heard_) return std::nullopt;
  const double silent = seconds(now - last_beat_);
  if (liveness_timeout_s_ > 0 && silent > liveness_timeout_s_)
    return fmt::format("no heartbeat for {:.1f} s (liveness timeout {:g} s: the process is stopped, e.g. SIGSTOP or "
                       "a debugger, or frozen); {}",
                       silent, liveness_timeout_s_, last_progress(now));
  if (!progress_ || progress_->deadline_s <= 0) return std::nullopt;
  const double quiet = seconds(now - last_progress_);
  if (quiet <= progress_->deadline_s) return std::nullopt;
  return fmt::format("no progress for {:.1f} s, past the {:.1f} s it promised after phase {}, step {} (it is alive: "
                     "last heartbeat {:.1f} s ago; likely {})",
                     quiet, progress_->deadline_s, phase_name(progress_->phase), progress_->step, silent,
                     stuck_hint(progress_->phase));
}

HeartbeatStatus WorkerWatch::status(Clock::time_point now) const {
  HeartbeatStatus s;
  s.heard = heard_;
  if (heard_) s.since_beat_s = seconds(now - last_beat_);
  if (progress_) {
    s.progress = true;
    s.phase = progress_->phase;
    s.step = progress_->step;
    s.deadline_s = progress_->deadline_s;
    s.metrics_json = progress_->metrics_json;
    s.since_progress_s = seconds(now - last_progress_);
  }
  return s;
}

std::vector<ProgressBeat> WorkerWatch::take_beats() {
  std::vector<ProgressBeat> out(std::make_move_iterator(beats_.begin()), std::make_move_iterator(beats_.end()));
  beats_.clear();
  return out;
}

std::optional<std::string> WorkerWatch::take_problem() {
  if (!problem_ || problem_taken_) return std::nullopt;
  problem_taken_ = true;
  return problem_;
}

}  // namespace lf::agent
