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

 private:
  unsigned __int128 state_ = 0;
  unsigned __int128 inc_ = 0;
  bool has32_ = false;
  uint32_t uint32_ = 0;
};

std::vector<size_t> numpy_permutation(uint64_t seed, size_t n);

}  // namespace lf
