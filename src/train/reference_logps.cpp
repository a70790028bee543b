#include "reference_logps.h"

#include <ATen/record_function.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "lf/common/progress_deadline.h"
#include "lf/model/adapters_off.h"
#include "lf/model/causal_lm.h"
#include "lf/parallel/strategy.h"
#include "sequence_logps.h"

namespace lf::train {

std::vector<std::vector<int64_t>> strided_batches(int64_t n, int64_t batch_examples, int64_t rank, int64_t world) {
  const int64_t bs = std::max<int64_t>(1, batch_examples);
  const int64_t batches = (n + bs - 1) / bs, rounds = (batches + world - 1) / world;
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(rounds));
  for (int64_t r = 0; r < rounds; ++r) {
    const int64_t k = r * world + rank;
    for (int64_t i = k * bs; i < std::min(n, (k + 1) * bs); ++i) out[static_cast<size_t>(r)].push_back(i);
  }
  return out;
}

int64_t examples_in(const std::vector<std::vector<int64_t>>& batches) {
  int64_t n = 0;
  for (const auto& b : batches) n += static_cast<int64_t>(b.size());
  return n;
}

std::vector<double> reference_logps(const ObjectiveContext& ctx, const TokenizedDataset& data,
                                    const std::vector<std::vector<int64_t>>& batches, bool pairwise,
                                    model::CausalLM* ref_model) {
  auto& m = *ctx.model;
  auto& strategy = *ctx.strategy;
  c10::NoGradGuard no_grad;
  std::optional<model::AdaptersOff> off;
  if (ctx.lora && !ref_model) off.emplace(m);
  LogpsOptions options;
  options.model = ref_model;
  std::vector<double> out(data.size(), 0.0);
  // Each forward's rows and their log-probabilities, left on the device until the pass ends: one host sync
  // for the pass instead of one a forward, so the host collates and launches the next forward while the
  // device still runs this one.
  std::vector<std::pair<std::vector<int64_t>, at::Tensor>> done;
  auto run = [&](const std::vector<int64_t>& rows) {
    done.emplace_back(rows, sequence_logps(ctx, collate(data, rows, ctx.pad_id), options).logps.to(at::kDouble));
  };
  for (const auto& ex : batches) {
    progress_reporter().evaluating(0);  // a pass over the data: evaluation's deadline, renewed per batch
    RECORD_USER_SCOPE("lf::reference");  // LF_PROFILE_TRACE_STEPS=0:N's span per micro-batch
    if (ex.empty()) {
      if (ref_model || !strategy.needs_every_forward()) continue;
      for (int f = 0; f < (pairwise ? 1 : 2); ++f) (void)sequence_logps(ctx, no_target_batch(ctx.pad_id));
    } else if (pairwise) {
      run(both_rows(ex));
    } else {
      run(pair_rows(ex, false));
      run(pair_rows(ex, true));
    }
  }
  for (const auto& [rows, logps] : done) {
    const auto lp = logps.cpu().contiguous();
    const double* p = lp.data_ptr<double>();
    for (size_t i = 0; i < rows.size(); ++i) out[static_cast<size_t>(rows[i])] = p[i];
  }
  if (strategy.world() > 1) out = strategy.all_reduce_sums(std::move(out));
  return out;
}

}  // namespace lf::train
