#include "lf/metrics/rank_series.h"

#include <fmt/format.h>

namespace lf::metrics {

namespace {

// One gauge family over every rank that has the value.
void gauge(Exposition& e, const std::map<int, RankSeries::Rank>& ranks, const std::string& node, const char* name,
           const char* help, std::optional<double> ProgressMetrics::*field) {
  bool any = false;
  for (const auto& [r, rank] : ranks) any = any || (rank.values.*field).has_value();
  if (!any) return;
  e.family(name, MetricType::kGauge, help);
  for (const auto& [r, rank] : ranks)
    if (const auto v = rank.values.*field)
      e.sample({{"node", node}, {"rank", std::to_string(r)}, {"local_rank", std::to_string(rank.report.local_rank)}},
               *v);
}

// A value every rank shares, once: global rank 0's (absent on the nodes without it).
void job_series(Exposition& e, const std::map<int, RankSeries::Rank>& ranks, const std::string& node, const char* name,
                MetricType type, const char* help, std::optional<double> ProgressMetrics::*field) {
  const auto it = ranks.find(0);
  if (it == ranks.end() || !(it->second.values.*field)) return;
  e.family(name, type, help);
  e.sample({{"node", node}, {"rank", "0"}, {"local_rank", std::to_string(it->second.report.local_rank)}},
           *(it->second.values.*field));
}

}  // namespace

void RankSeries::update(const std::vector<RankReport>& reports, double wall_now) {
  for (const auto& report : reports) {
    Rank& rank = ranks_[report.rank];
    rank.report = report;
    if (!report.progress) continue;
    rank.values = ProgressMetrics::parse(report.metrics_json);
    // A step beat of the training phase finished `report.step`; a resumed or restarted run
    // may start below what was seen: follow it, counting nothing for the way back.
    if (!rank.last_step || report.step < *rank.last_step) {
      rank.last_step = report.step;
      rank.last_step_wall = wall_now - report.since_progress_s;
      continue;
    }
    if (report.step > *rank.last_step && report.phase == "training") {
      if (rank.values.step_s)
        rank.step_seconds.observe(*rank.values.step_s, static_cast<uint64_t>(report.step - *rank.last_step));
      rank.last_step = report.step;
      rank.last_step_wall = wall_now - report.since_progress_s;
    }
  }
}

void RankSeries::write(Exposition& e, const std::string& node) const {
  const auto labels = [&](int r, const Rank& rank) {
    return Labels{{"node", node}, {"rank", std::to_string(r)}, {"local_rank", std::to_string(rank.report.local_rank)}};
  };
  bool any_progress = false;
  for (const auto& [r, rank] : ranks_) any_progress = any_progress || rank.report.progress;
  if (any_progress) {
    e.family("lf_train_step", MetricType::kGauge, "Last finished optimizer step of the rank");
    for (const auto& [r, rank] : ranks_)
      if (rank.report.progress) e.sample(labels(r, rank), static_cast<double>(rank.report.step));
    e.family("lf_train_phase", MetricType::kGauge, "1 for the phase the rank last reported");
    for (const auto& [r, rank] : ranks_)
      if (rank.report.progress) {
        auto l = labels(r, rank);
        l.emplace_back("phase", rank.report.phase);
        e.sample(l, 1);
      }
    e.family("lf_train_last_step_timestamp_seconds", MetricType::kGauge,
             "Unix time of the beat that reported the rank's last step (alert on time() minus this)");
    for (const auto& [r, rank] : ranks_)
      if (rank.last_step) e.sample(labels(r, rank), rank.last_step_wall);
  }
  // The job's (every rank has the same): once, from global rank 0.
  job_series(e, ranks_, node, "lf_train_loss", MetricType::kGauge, "Training loss of the job's last logged step (rank 0's)",
             &ProgressMetrics::loss);
  job_series(e, ranks_, node, "lf_train_learning_rate", MetricType::kGauge, "Learning rate of the last step (rank 0's)",
             &ProgressMetrics::learning_rate);
  job_series(e, ranks_, node, "lf_train_grad_norm", MetricType::kGauge,
             "Global gradient norm of the last step, before clipping (rank 0's)", &ProgressMetrics::grad_norm);
  job_series(e, ranks_, node, "lf_train_epoch", MetricType::kGauge, "Fractional epoch (rank 0's)", &ProgressMetrics::epoch);
  job_series(e, ranks_, node, "lf_train_total_steps", MetricType::kGauge,
             "Optimizer steps the job runs in all (lf_train_step / this: the share done)", &ProgressMetrics::total_steps);
  job_series(e, ranks_, node, "lf_train_tokens_total", MetricType::kCounter,
             "Tokens the job trained on so far, every rank's (rate() of it: the job's tokens per second)",
             &ProgressMetrics::tokens);
  gauge(e, ranks_, node, "lf_train_tokens_per_second", "This rank's real (non-pad) tokens per second, last step",
        &ProgressMetrics::tokens_per_s);
  gauge(e, ranks_, node, "lf_train_mfu", "Model FLOPs utilisation of the last step (0..1)", &ProgressMetrics::mfu);
  gauge(e, ranks_, node, "lf_train_comm_exposed_seconds",
        "Communication of the last step that backward did not hide (LF_PROFILE_PHASES=1)", &ProgressMetrics::comm_exposed_s);
  job_series(e, ranks_, node, "lf_train_eval_loss", MetricType::kGauge, "Last evaluation loss (rank 0's)",
             &ProgressMetrics::eval_loss);
  gauge(e, ranks_, node, "lf_train_checkpoint_seconds", "Seconds the last checkpoint save took",
        &ProgressMetrics::checkpoint_s);
  job_series(e, ranks_, node, "lf_train_rewards_accuracy", MetricType::kGauge,
             "dpo: share of the last step's pairs whose chosen reward is higher", &ProgressMetrics::rewards_accuracy);
  job_series(e, ranks_, node, "lf_train_rewards_margin", MetricType::kGauge,
             "dpo, kto: mean chosen minus rejected reward, last step", &ProgressMetrics::rewards_margin);
  job_series(e, ranks_, node, "lf_train_rewards_chosen", MetricType::kGauge,
             "dpo, kto: mean reward of the chosen (desirable) responses, last step", &ProgressMetrics::rewards_chosen);
  job_series(e, ranks_, node, "lf_train_rewards_rejected", MetricType::kGauge,
             "dpo, kto: mean reward of the rejected (undesirable) responses, last step", &ProgressMetrics::rewards_rejected);
  job_series(e, ranks_, node, "lf_train_kl", MetricType::kGauge, "kto: the KL estimate of the last step",
             &ProgressMetrics::kl);
  job_series(e, ranks_, node, "lf_train_logps_chosen", MetricType::kGauge,
             "dpo, kto: mean log-probability of the chosen (desirable) responses, last step", &ProgressMetrics::logps_chosen);
  job_series(e, ranks_, node, "lf_train_logps_rejected", MetricType::kGauge,
             "dpo, kto: mean log-probability of the rejected (undesirable) responses, last step",
             &ProgressMetrics::logps_rejected);
  job_series(e, ranks_, node, "lf_train_logits_chosen", MetricType::kGauge,
             "dpo, kto: mean logit over the chosen (desirable) responses, last step", &ProgressMetrics::logits_chosen);
  job_series(e, ranks_, node, "lf_train_logits_rejected", MetricType::kGauge,
             "dpo, kto: mean logit over the rejected (undesirable) responses, last step",
             &ProgressMetrics::logits_rejected);
  bool any_steps = false;
  for (const auto& [r, rank] : ranks_) any_steps = any_steps || rank.last_step.has_value();
  if (any_steps) {
    e.family("lf_train_step_seconds", MetricType::kHistogram, "Seconds per optimizer step");
    for (const auto& [r, rank] : ranks_)
      if (rank.last_step) rank.step_seconds.write(e, labels(r, rank));
  }
  bool any_heard = false;
  for (const auto& [r, rank] : ranks_) any_heard = any_heard || (rank.report.heard && rank.report.alive);
  if (any_heard) {
    e.family("lf_worker_heartbeat_age_seconds", MetricType::kGauge,
             "Seconds since the worker's last heartbeat (absent before its first)");
    for (const auto& [r, rank] : ranks_)
      if (rank.report.heard && rank.report.alive) e.sample(labels(r, rank), rank.report.since_beat_s);
  }
}

}  // namespace lf::metrics
