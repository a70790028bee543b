#pragma once
// DeepSpeed's communication buckets as ZeRO uses them: counts of whole units (ZeRO moves units,
// DeepSpeed parameters), resolved once by the strategy (src/parallel/zero_roles.cpp) from the
// units it built and by the memory model from config.json, so both say the same. Torch-free.
//   prefetch_bucket_mb (stage3_prefetch_bucket_size): stage 3 gathers as many units ahead of the
//     one computing as fit (DeepSpeed prefetches while fewer than the bucket's elements are on
//     their way): at least one, none when the bucket is 0;
//   reduce_bucket_mb (reduce_bucket_size): as many units' reductions stay in flight (each keeps its
//     full fp32 gradient until it is waited for) as the bucket's elements hold, at least two (one
//     unit's reduction overlaps the next one's backward); overlap_comm false: none (each reduction
//     waited for as it is issued);
//   allgather_bucket_mb (allgather_bucket_size): stages 1 and 2 keep as many of the step's
//     all-gathers of the new parameters in flight, at least one.
#include <cstdint>

namespace lf::plan {

struct ZeroCommInputs {
  int64_t stage = 1;
  double prefetch_bucket_mb = 25, reduce_bucket_mb = 25, allgather_bucket_mb = 25;  // MiB of the compute dtype
  bool overlap_comm = true;
  int64_t compute_bytes = 2;
  int64_t largest_gathered_bytes = 0;  // the largest unit as gathered (trainable + frozen parameters)
  int64_t largest_trainable = 0;       // the largest unit's trainable elements (padded to the world)
  int64_t units = 1;
};

struct ZeroCommDepths {
  int64_t prefetch_units = 0;            // stage 3: units gathered ahead of the one computing
  int64_t reductions_in_flight = 2;      // issued and not yet waited for (0: each waited for at once)
  int64_t update_gathers_in_flight = 0;  // stages 1, 2: the step's all-gathers issued and not waited for
};

ZeroCommDepths zero_comm_depths(const ZeroCommInputs& in);

}  // namespace lf::plan
