#pragma once
// numpy's default_rng(seed).permutation(n) bit for bit (SeedSequence -> PCG64
// XSL-RR -> Fisher-Yates with random_interval), so val_size splits pick the
// same examples as HF datasets' train_test_split in LLaMA-Factory.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace lf {

class NumpyPcg64 {
 public:
  explicit NumpyPcg64(uint64_t seed);  // np.random.default_rng(seed)
  uint64_t next64();
  uint32_t next32();
  uint64_t interval(uint64_t max);  // random_interval: uniform in [0, max]
  double uniform();                 // Generator.random(): [0, 1) with 53 bits

 private:
  unsigned __int128 state_ = 0;
  unsigned __int128 inc_ = 0;
  bool has32_ = false;
  uint32_t uint32_ = 0;
};

std::vector<size_t> numpy_permutation(uint64_t seed, size_t n);

// numpy's legacy global RandomState (MT19937) after np.random.seed(seed), which
// transformers.set_seed(seed) performs before LLaMA-Factory loads datasets; its
// num_samples sampling draws from it, dataset after dataset.
class NumpyLegacyRandom {
 public:
  explicit NumpyLegacyRandom(uint32_t seed);
  uint32_t next32();
  uint64_t next64();
  uint64_t interval(uint64_t max);  // random_interval / masked bounded draw in [0, max]
  // dataset_attr.num_samples: permutation(n)[:k], then choice(n, k - n) if k > n.
  std::vector<size_t> sample(size_t n, size_t k);

 private:
  void generate();
  uint32_t key_[624];
  int pos_ = 624;
};

// HF datasets' _interleave_map_style_datasets: indices into the concatenation
// of datasets of `lengths`. Empty `probabilities`: round robin; else sources
// drawn with default_rng(seed).choice(n, 1000, p) batches. `oversampling`:
// "all_exhausted" (stop once every source wrapped) vs "first_exhausted".
std::vector<size_t> interleave_indices(const std::vector<size_t>& lengths,
                                       const std::vector<double>& probabilities, uint64_t seed,
                                       bool oversampling);

}  // namespace lf
