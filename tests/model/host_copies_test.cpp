// host_copies.h: the values arrive unchanged (CPU and GPU), and on a GPU none of the copies waits for
// the work queued before it, nor HostScalars::read for the work launched after its copy. The GPU part
// skips without one; it measures no time, it asks CUDA events whether queued work has run.
#include "lf/model/host_copies.h"

#include <ATen/ATen.h>
#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <gtest/gtest.h>

#include <vector>

namespace lf::model {
namespace {

TEST(HostCopies, ValuesArriveInOrderOnTheCpu) {
  const at::Device cpu(at::kCPU);
  const auto ids = at::arange(6, at::kLong).view({2, 3});
  EXPECT_TRUE(at::equal(to_device(ids, cpu), ids));
  EXPECT_FALSE(to_device(at::Tensor(), cpu).defined());
  auto dst = at::zeros({2, 3}, at::kLong);
  copy_from_host(dst, ids);
  EXPECT_TRUE(at::equal(dst, ids));
  const HostScalars s({at::full({}, 1.5), at::tensor({2, 3}, at::kInt), at::full({1}, -0.25, at::kDouble)});
  ASSERT_TRUE(s.staged());
  EXPECT_EQ(s.read(), (std::vector<double>{1.5, 2, 3, -0.25}));
  EXPECT_FALSE(HostScalars().staged());
}

class GpuQueue {
 public:
  explicit GpuQueue(const at::Device& gpu)
      : gpu_(gpu), x_(at::randn({8192, 8192}, at::TensorOptions().dtype(at::kBFloat16).device(gpu))) {}
  // Tens of milliseconds of GEMMs queued, then an event after them: done() says whether they have run.
  void fill() {
    for (int i = 0; i < 40; ++i) (void)at::mm(x_, x_);
    const c10::impl::VirtualGuardImpl guard(c10::DeviceType::CUDA);
    event_.record(guard.getStream(gpu_));
  }
  bool done() const { return event_.query(); }

 private:
  at::Device gpu_;
  at::Tensor x_;
  c10::Event event_{c10::DeviceType::CUDA};
};

TEST(HostCopies, NoCopyWaitsForTheGpu) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  const at::Device gpu(at::kCUDA, 0);
  const auto ids = at::arange(4096, at::kLong);
  GpuQueue queue(gpu);
  (void)to_device(ids, gpu), (void)HostScalars({at::ones({}, gpu)}).read();  // the page-locked blocks, cached
  (void)at::ones({}, at::TensorOptions().device(gpu)).item<double>();  // the stream drained

  queue.fill();
  (void)ids.to(gpu);  // the premise: torch's own copy drains the queue
  EXPECT_TRUE(queue.done()) << "torch's host-to-device copy no longer waits: host_copies.h's reason is gone";

  queue.fill();
  const auto on = to_device(ids, gpu);
  EXPECT_FALSE(queue.done()) << "to_device waited for the work queued before it";
  EXPECT_TRUE(at::equal(on.cpu(), ids));

  auto dst = at::empty({4096}, at::TensorOptions().dtype(at::kLong).device(gpu));
  queue.fill();
  copy_from_host(dst, ids);
  EXPECT_FALSE(queue.done()) << "copy_from_host waited for the work queued before it";
  EXPECT_TRUE(at::equal(dst.cpu(), ids));

  const HostScalars s({at::full({}, 7.0, at::TensorOptions().device(gpu)), at::arange(3, at::TensorOptions().device(gpu))});
  queue.fill();
  EXPECT_EQ(s.read(), (std::vector<double>{7, 0, 1, 2}));
  EXPECT_FALSE(queue.done()) << "HostScalars::read waited for the work launched after its copy";
}

}  // namespace
}  // namespace lf::model
