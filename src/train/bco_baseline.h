#pragma once
// BCO's reward baseline in DPO (LLaMA-Factory's CustomDPOTrainer.bco_loss with pref_bco_weight): TRL
// 0.24's RunningMoments, updated once per micro-batch (training and evaluation alike) with the mean of
// the micro-batch's chosen and rejected rewards. Across ranks TRL's get_global_statistics gathers
// them: the update's mean is the mean of the ranks' means, its count the number of ranks. As every
// update has the same count, the baseline is the mean of every update's mean since the run started
// (or resumed: LLaMA-Factory does not save it in checkpoints, neither does lf-train). Internal to lf_train.
#include "lf/parallel/strategy.h"

namespace lf::train {

class BcoBaseline {
 public:
  BcoBaseline() = default;
  explicit BcoBaseline(parallel::ParallelStrategy& strategy) : strategy_(&strategy) {}
  explicit operator bool() const { return strategy_ != nullptr; }

  // Updates the moments with this rank's micro-batch mean `local_mean` (`has`: false on a rank without
  // examples this round, which joins the all-reduce with nothing) and returns the running mean after it.
  // Every rank calls it at the same point of each micro-step (a collective when world > 1).
  double baseline(double local_mean, bool has) {
    double sum = has ? local_mean : 0.0, count = has ? 1.0 : 0.0;
    if (strategy_->world() > 1) {
      const auto r = strategy_->all_reduce_sums({sum, count});
      sum = r[0];
      count = r[1];
    }
    if (count <= 0) return mean_;
    // RunningMoments.update: mean += (x - mean) * n / (count + n); the count starts at 1e-24.
    const double x = sum / count, total = count_ + count;
    mean_ += (x - mean_) * count / total;
    count_ = total;
    return mean_;
  }

 private:
  parallel::ParallelStrategy* strategy_ = nullptr;
  double mean_ = 0.0;
  double count_ = 1e-24;
};

}  // namespace lf::train
