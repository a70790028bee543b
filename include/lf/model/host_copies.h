#pragma once
// Copies between the host and a GPU that do not make the host wait for the GPU. torch's plain
// `.to(cuda)` of a host tensor synchronizes the stream (memcpy_and_sync; and CUDA itself stages
// pageable memory after a stream sync), so every batch, index and mask moved that way drained the
// GPU's queue in the middle of a step: the GPU then idled while the host launched the next kernels.
// From page-locked memory a copy is only queued; the caching host allocator keeps the staging block
// until the copy has run. Reading device values back goes the same way: HostScalars queues their copy
// and an event, and read() waits for that event only, not for the work launched after it.
#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

namespace c10 {
class Event;
}

namespace lf::model {

// `t` on `device` (undefined stays undefined); host to GPU: queued behind the stream's work.
at::Tensor to_device(const at::Tensor& t, const c10::Device& device);
// dst <- src, a host tensor of dst's shape, the same way (a CUDA graph's static inputs).
void copy_from_host(at::Tensor& dst, const at::Tensor& src);

// Device values (tensors of any shape and number type, flattened in order; host ones join them) as doubles
// on the host.
class HostScalars {
 public:
  HostScalars() = default;
  explicit HostScalars(const std::vector<at::Tensor>& values);  // queues the copy; returns at once
  bool staged() const { return host_.defined(); }
  std::vector<double> read() const;  // waits for the copy, then the values in their order

 private:
  at::Tensor host_;                    // fp64 [n], page-locked on a GPU run
  std::shared_ptr<c10::Event> ready_;  // recorded after the copy (null on the CPU)
};

}  // namespace lf::model
