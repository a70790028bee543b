#include "lf/metrics/rank_series.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace lf::metrics {

namespace {

using json = nlohmann::json;

std::optional<double> number(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

// One gauge family over every rank that has the value.
void gauge(Exposition& e, const std::map<int, RankSeries::Rank>& ranks, const std::string& node, const char* name,
           const char* help, std::optional<double> RankValues::*field) {
  bool any = false;
  for (const auto& [r, rank] : ranks) any = any || (rank.values.*field).has_value();
  if (!any) return;
  e.family(name, MetricType::kGauge, help);
  for (const auto& [r, rank] : ranks)
    if (const auto v = rank.values.*field)
      e.sample({{"node", node}, {"rank", std::to_string(r)}, {"local_rank", std::to_string(rank.report.local_rank)}},
               *v);
}

}  // namespace

RankValues RankValues::parse(const std::string& metrics_json) {
  RankValues v;
  const json j = json::parse(metrics_json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return v;
  v.loss = number(j, "loss");
  v.learning_rate = number(j, "learning_rate");
  v.grad_norm = number(j, "grad_norm");
  v.epoch = number(j, "epoch");
  v.tokens_per_s = number(j, "tokens_per_s");
  v.mfu = number(j, "mfu");
  v.step_s = number(j, "step_s");
  v.comm_exposed_s = number(j, "comm_exposed_s");
  v.eval_loss = number(j, "eval_loss");
  v.checkpoint_s = number(j, "checkpoint_s");
  v.rewards_accuracy = number(j, "rewards/accuracies");
  v.rewards_margin = number(j, "rewards/margins");
  v.rewards_chosen = number(j, "rewards/chosen");
  v.rewards_rejected = number(j, "rewards/rejected");
  v.kl = number(j, "kl");
  return v;
}

void RankSeries::update(const std::vector<RankReport>& reports, double wall_now) {
  for (const auto& report : reports) {
    Rank& rank = ranks_[report.rank];
    rank.report = report;
    if (!report.progress) continue;
    rank.values = RankValues::parse(report.metrics_json);
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
  gauge(e, ranks_, node, "lf_train_loss", "Training loss of the rank's last step", &RankValues::loss);
  gauge(e, ranks_, node, "lf_train_learning_rate", "Learning rate of the last step", &RankValues::learning_rate);
  gauge(e, ranks_, node, "lf_train_grad_norm", "Global gradient norm of the last step (before clipping)",
        &RankValues::grad_norm);
  gauge(e, ranks_, node, "lf_train_epoch", "Fractional epoch", &RankValues::epoch);
  gauge(e, ranks_, node, "lf_train_tokens_per_second", "This rank's real (non-pad) tokens per second, last step",
        &RankValues::tokens_per_s);
  gauge(e, ranks_, node, "lf_train_mfu", "Model FLOPs utilisation of the last step (0..1)", &RankValues::mfu);
  gauge(e, ranks_, node, "lf_train_comm_exposed_seconds",
        "Communication of the last step that backward did not hide (LF_PROFILE_PHASES=1)", &RankValues::comm_exposed_s);
  gauge(e, ranks_, node, "lf_train_eval_loss", "Last evaluation loss", &RankValues::eval_loss);
  gauge(e, ranks_, node, "lf_train_checkpoint_seconds", "Seconds the last checkpoint save took",
        &RankValues::checkpoint_s);
  gauge(e, ranks_, node, "lf_train_rewards_accuracy", "dpo: share of the last step's pairs whose chosen reward is higher",
        &RankValues::rewards_accuracy);
  gauge(e, ranks_, node, "lf_train_rewards_margin", "dpo, kto: mean chosen minus rejected reward, last step",
        &RankValues::rewards_margin);
  gauge(e, ranks_, node, "lf_train_rewards_chosen", "dpo, kto: mean reward of the chosen (desirable) responses, last step",
        &RankValues::rewards_chosen);
  gauge(e, ranks_, node, "lf_train_rewards_rejected", "dpo, kto: mean reward of the rejected (undesirable) responses, last step",
        &RankValues::rewards_rejected);
  gauge(e, ranks_, node, "lf_train_kl", "kto: the KL estimate of the last step", &RankValues::kl);
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
