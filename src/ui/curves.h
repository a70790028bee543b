#pragma once
// The page's curves: loss, eval loss, learning rate and grad norm by optimizer step, from
// progress records (lf/common/progress_metrics.h: global rank 0's beats live, the run's
// log_history offline). Drawn points are thinned to a bound, so a long run costs the page the
// same as a short one. Private to src/ui. Threading: one thread (the page's).
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "lf/common/progress_metrics.h"
#include "lf/rendezvous/messages.h"

namespace lf::ui {

class Curves {
 public:
  using Series = std::vector<std::pair<int64_t, double>>;

  // One step's record. A step at or below the last one drawn (a restart resuming from a
  // checkpoint) first removes the points from that step on.
  void add(int64_t step, const ProgressMetrics& m);
  // One evaluation (offline: log_history's eval entries).
  void add_eval(int64_t step, double eval_loss);
  // Follows JobRecord::points() (live): parses only the points it has not seen; rebuilds when the
  // record dropped or thinned some.
  void follow(const std::vector<rdzv::StepPoint>& points);
  void clear();

  // {"loss": [[step, v], ...], "eval_loss": ..., "lr": ..., "grad_norm": ...}, each at most
  // max_points points (evenly thinned, the last one kept).
  nlohmann::json to_json(size_t max_points) const;
  // The mean step time of the last steps that reported one; none before any.
  std::optional<double> recent_step_seconds() const;
  int64_t last_step() const { return last_step_; }

  const Series& loss() const { return loss_; }
  const Series& eval_loss() const { return eval_; }

 private:
  void drop_from(int64_t step);

  Series loss_, eval_, lr_, grad_norm_, step_s_;
  std::optional<double> last_eval_value_;
  int64_t last_step_ = -1;
  size_t followed_ = 0;          // JobRecord points parsed so far
  int64_t followed_last_step_ = -1;  // the step of the last of them (a changed one means a rebuild)
};

}  // namespace lf::ui
