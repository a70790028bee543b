#pragma once
// ZeRO-Offload's copies between the GPU and page-locked host memory on streams of their own,
// so that they overlap compute instead of queueing behind it (FSDP2's offload does the same):
// a unit's reduced gradient goes down on the `down` stream once backward has produced it
// (backward goes on), its updated shard comes up on the `up` stream from the host step's
// thread, and the forward that reads it waits for it on the device (an event), not on the host.
// On a CPU run (and in a build without CUDA) every copy is a plain synchronous copy: the same
// order, the same bytes. streams = false (the plan's LF_OFFLOAD_COPY_STREAMS=0) queues them on
// the compute stream instead (the A/B). Internal to lf_parallel.
// The fp32 temporaries of a copy up are allocated on the up stream (stream-ordered there), so
// the up stream's pool keeps the largest unit's fp32 shard (and, parameters offloaded, its
// compute-dtype copy) reserved, out of the compute stream's reach: counted in the allocator's
// peak, not in ZeRO's predicted bytes. A small persistent staging buffer copied through in
// chunks would free that; not done (it changes a path measured only as it is).
// Threading: copy_down / on_up / wait_up from the training thread or autograd's (whose current
// stream is the training thread's); copy_up from the host step's thread; a unit is gathered only
// after its host step, so the two never use the up stream for the same unit at once; a unit's
// wait_up only after its copy_up / on_up has returned.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <memory>

namespace lf::parallel {

class OffloadCopies {
 public:
  OffloadCopies(c10::Device device, int64_t units, bool streams);
  ~OffloadCopies();
  OffloadCopies(const OffloadCopies&) = delete;
  OffloadCopies& operator=(const OffloadCopies&) = delete;

  // dst (host) = src (device), after the work queued so far on the calling thread's stream;
  // src's memory is not reused before the copy is done. The host reads dst after a device
  // synchronisation (ZeRO's flush).
  void copy_down(const at::Tensor& dst, const at::Tensor& src);
  // dst (device, any dtype: the cast runs on the device) = src (host fp32), then unit's event.
  // after_caller: first wait for the work queued on the calling thread's stream (dst was just
  // allocated there, and its block may still be read by that work); without it the caller
  // guarantees dst's readers are done (dev_shard after the step's synchronisation).
  void copy_up(int64_t unit, const at::Tensor& dst, const at::Tensor& src, bool after_caller);
  // Runs `work` with the up stream current (what it queues runs there), then unit's event:
  // a gather whose input comes up from the host. Memory `work` allocates belongs to the up
  // stream: keep it in what work's queued ops own (a collective's input), not in the model.
  void on_up(int64_t unit, const std::function<void()>& work, bool after_caller);
  // The calling thread's stream waits on the device for unit's last copy_up.
  void wait_up(int64_t unit);
  bool streams() const;  // the copies run on streams of their own

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lf::parallel
