#pragma once
// ZeRO's gradient reduction (DeepSpeed's stage3 reduce-and-partition): the GradSink each trainable
// parameter's gradient is routed to (model/grad_sink.h) adds each use's gradient into its unit's
// fp32 buffer and, once the unit's uses are all in (counted at forward, or at the recompute under
// activation checkpointing), reduce-scatters it: every micro-step when the gradient is sharded
// (stages 2, 3), on the step's last one otherwise (stage 1), units going from the head down on
// every rank. At most ZeroRoles::reductions_in_flight are waited for later (overlap_comm false:
// none); retiring a reduction adds its shard into the unit's gradient shard, or (offload) sends it
// down to host memory, summing its share of the device norm on the way.
// Internal to lf_parallel. Threading: take / take_rows from autograd's thread during backward;
// the rest from the training thread.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "lf/model/grad_sink.h"
#include "zero_unit_table.h"

namespace lf::parallel {

class GradReduction final : public model::GradSink {
 public:
  explicit GradReduction(ZeroContext& z) : z_(z), next_to_launch_(z.head) {}
  ~GradReduction() override;  // the routes go
  GradReduction(const GradReduction&) = delete;
  GradReduction& operator=(const GradReduction&) = delete;

  // Routes the unit's trainable parameters here (once its group is built).
  void route(int64_t unit);
  // Before a micro-step's forward; `last`: the step's final one, when every gradient is synchronised.
  void begin(bool last) { syncing_ = last; }
  // Once the micro-step's backward returned: every unit due is reduced (a unit that got no
  // gradient on this rank adds zeros: the other ranks' reductions need it) and retired.
  void finish();

  bool expect(const at::Tensor& param) override;
  void take(const at::Tensor& param, const at::Tensor& grad) override;
  bool routes_same_dtype() const override { return true; }
  bool expect_rows(const at::Tensor& param) override { return expect(param); }
  void take_rows(const at::Tensor& param, const at::Tensor& ids, const at::Tensor& rows) override;

 private:
  struct Where {
    int64_t unit = 0;
    size_t param = 0;
  };
  const Where& where(const at::Tensor& param) const;
  at::Tensor& grad_flat(ZeroUnit& u);
  void arrived(int64_t unit);
  void launch_ready();
  void launch(int64_t unit);
  void retire(int64_t unit);
  void send_down(ZeroUnit& u);

  ZeroContext& z_;
  std::unordered_map<const c10::TensorImpl*, Where> where_;
  std::vector<at::Tensor> routed_;
  bool syncing_ = false;
  int64_t next_to_launch_ = 0;  // units launch from the head down, in the same order on every rank
  std::deque<int64_t> pending_;  // launched reductions not yet retired
};

}  // namespace lf::parallel
