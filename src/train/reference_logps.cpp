#include "reference_logps.h"

#include <c10/core/GradMode.h>

#include <algorithm>
#include <memory>
#include <optional>

#include "lf/common/log.h"
#include "lf/model/adapters_off.h"
#include "lf/model/causal_lm.h"
#include "lf/parallel/strategy.h"
#include "sequence_logps.h"

namespace lf::train {

std::vector<double> reference_logps(const ObjectiveContext& ctx, const TokenizedDataset& data,
                                    int64_t batch_examples, bool pairwise) {
  auto& m = *ctx.model;
  auto& strategy = *ctx.strategy;
  const int64_t rank = strategy.rank(), world = strategy.world();
  const int64_t n = static_cast<int64_t>(data.num_examples());
  const int64_t bs = std::max<int64_t>(1, batch_examples);
  c10::NoGradGuard no_grad;
  const bool was_training = m.training();
  m.set_training(false);
  std::optional<model::AdaptersOff> off;
  if (ctx.lora) off.emplace(m);
  std::vector<double> out(data.size(), 0.0);
  // Each forward's rows, written back by row index.
  auto run = [&](const std::vector<int64_t>& rows) {
    const auto b = collate(data, rows, ctx.pad_id);
    const auto lp = sequence_logps(ctx, b).logps.to(at::kDouble).cpu().contiguous();
    const double* p = lp.data_ptr<double>();
    for (size_t i = 0; i < rows.size(); ++i) out[static_cast<size_t>(rows[i])] = p[i];
  };
  const int64_t batches = (n + bs - 1) / bs;
  const int64_t rounds = strategy.needs_every_forward() ? (batches + world - 1) / world : 0;
  const int64_t forwards = pairwise ? 1 : 2;
  int64_t round = 0;
  for (int64_t k = rank; k < batches; k += world, ++round) {
    std::vector<int64_t> ex;
    for (int64_t i = k * bs; i < std::min(n, (k + 1) * bs); ++i) ex.push_back(i);
    if (pairwise) {
      run(both_rows(ex));
    } else {
      run(pair_rows(ex, false));
      run(pair_rows(ex, true));
    }
  }
  for (; round < rounds; ++round)
    for (int64_t f = 0; f < forwards; ++f) (void)sequence_logps(ctx, no_target_batch(ctx.pad_id));
  m.set_training(was_training);
  if (world > 1) out = strategy.all_reduce_sums(std::move(out));
  return out;
}

}  // namespace lf::train
