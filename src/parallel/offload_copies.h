#pragma once
// ZeRO-Offload's copies between the GPU and page-locked host memory on streams of their own,
// so that they overlap compute instead of queueing behind it (FSDP2's offload does the same):
// a unit's reduced gradient goes down on the `down` stream once backward has produced it
// (backward goes on), its updated shard comes up on the `up` stream from the host step's
// thread, and the forward that reads it waits for it on the device (an event), not on the host.
// On a CPU run (and in a build without CUDA) every copy is a plain synchronous copy: the same
// order, the same bytes. LF_OFFLOAD_COPY_STREAMS=0 queues them on the compute stream instead
// (the A/B). Internal to lf_parallel.
// Threading: copy_down / wait_up from the training thread; copy_up from one thread
// at a time (the host step's); a unit's wait_up only after its copy_up has returned.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <memory>

namespace lf::parallel {

class OffloadCopies {
 public:
  OffloadCopies(c10::Device device, int64_t units);
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
