#include "lf/train/data_order.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>

#include "lf/common/error.h"

namespace lf::train {

std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch) {
  LF_CHECK(n >= 0, ConfigError, "epoch_permutation: negative example count {}", n);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed + static_cast<uint64_t>(epoch));
  // randperm takes the generator's lock itself.
  const auto perm = at::randperm(n, gen, at::TensorOptions().dtype(at::kLong));
  const auto* p = perm.data_ptr<int64_t>();
  return {p, p + n};
}

int64_t steps_per_epoch(int64_t n, const StepLayout& l) {
  const int64_t g = l.global_batch();
  return (n + g - 1) / g;
}

std::vector<int64_t> step_examples(const std::vector<int64_t>& perm, int64_t step, const StepLayout& l) {
  const auto n = static_cast<int64_t>(perm.size());
  const int64_t begin = std::min(n, step * l.global_batch());
  const int64_t end = std::min(n, begin + l.global_batch());
  return {perm.begin() + begin, perm.begin() + end};
}

std::vector<std::vector<int64_t>> rank_micro_batches(const std::vector<int64_t>& perm, int64_t step,
                                                     const StepLayout& l, int64_t rank) {
  LF_CHECK(rank >= 0 && rank < l.world, ConfigError, "rank {} outside world size {}", rank, l.world);
  const auto all = step_examples(perm, step, l);
  const auto n = static_cast<int64_t>(all.size());
  std::vector<std::vector<int64_t>> out;
  for (int64_t k = 0; k < l.accumulation; ++k) {
    const int64_t begin = std::min(n, k * l.micro_batch * l.world + rank * l.micro_batch);
    const int64_t end = std::min(n, begin + l.micro_batch);
    out.emplace_back(all.begin() + begin, all.begin() + end);
  }
  while (!out.empty() && out.back().empty()) out.pop_back();
  return out;
}

}  // namespace lf::train
