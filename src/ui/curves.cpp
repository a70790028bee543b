#include "curves.h"

#include <algorithm>

namespace lf::ui {

namespace {

void drop_series_from(Curves::Series& s, int64_t step) {
  while (!s.empty() && s.back().first >= step) s.pop_back();
}

nlohmann::json thinned(const Curves::Series& s, size_t max_points) {
  nlohmann::json out = nlohmann::json::array();
  if (s.empty()) return out;
  const size_t stride = max_points == 0 ? 1 : (s.size() + max_points - 1) / max_points;
  for (size_t i = 0; i < s.size(); i += stride) out.push_back({s[i].first, s[i].second});
  if ((s.size() - 1) % stride != 0) out.push_back({s.back().first, s.back().second});
  return out;
}

}  // namespace

void Curves::drop_from(int64_t step) {
  for (auto* s : {&loss_, &eval_, &lr_, &grad_norm_, &step_s_}) drop_series_from(*s, step);
  last_eval_value_ = eval_.empty() ? std::nullopt : std::optional<double>(eval_.back().second);
}

void Curves::add(int64_t step, const ProgressMetrics& m) {
  if (step <= last_step_) drop_from(step);
  last_step_ = step;
  if (step <= 0) return;  // before the first step: loading, tokenizing
  if (m.loss) loss_.emplace_back(step, *m.loss);
  if (m.learning_rate) lr_.emplace_back(step, *m.learning_rate);
  if (m.grad_norm) grad_norm_.emplace_back(step, *m.grad_norm);
  if (m.step_s) step_s_.emplace_back(step, *m.step_s);
  // eval_loss rides on every later beat until the next evaluation: a point when it changes.
  if (m.eval_loss && (!last_eval_value_ || *last_eval_value_ != *m.eval_loss)) add_eval(step, *m.eval_loss);
}

void Curves::add_eval(int64_t step, double eval_loss) {
  drop_series_from(eval_, step + 1);
  eval_.emplace_back(step, eval_loss);
  last_eval_value_ = eval_loss;
}

void Curves::follow(const std::vector<rdzv::StepPoint>& points) {
  const bool same_prefix = followed_ <= points.size() &&
                           (followed_ == 0 || points[followed_ - 1].step == followed_last_step_);
  if (!same_prefix) clear();
  for (size_t i = followed_; i < points.size(); ++i) {
    // Only the step records: a restart's loading beats (step 0 or the resumed step) carry the
    // last run's values, which belong to its own step.
    if (points[i].phase == "training" || points[i].phase == "evaluating" || points[i].phase == "saving" ||
        points[i].phase == "done")
      add(points[i].step, ProgressMetrics::parse(points[i].metrics_json));
  }
  // The record replaces its last point by the same step's later beat (evaluating, saving): that
  // one is parsed again next time.
  followed_ = points.empty() ? 0 : points.size() - 1;
  followed_last_step_ = followed_ > 0 ? points[followed_ - 1].step : -1;
}

void Curves::clear() {
  *this = Curves();
}

nlohmann::json Curves::to_json(size_t max_points) const {
  return {{"loss", thinned(loss_, max_points)},
          {"eval_loss", thinned(eval_, max_points)},
          {"lr", thinned(lr_, max_points)},
          {"grad_norm", thinned(grad_norm_, max_points)}};
}

std::optional<double> Curves::recent_step_seconds() const {
  if (step_s_.empty()) return std::nullopt;
  const size_t n = std::min<size_t>(step_s_.size(), 20);
  double sum = 0;
  for (size_t i = step_s_.size() - n; i < step_s_.size(); ++i) sum += step_s_[i].second;
  return sum / static_cast<double>(n);
}

}  // namespace lf::ui
