// lf-comm-bench: all-reduce bus bandwidth through lf-train's Communicator (the
// same measurement as ../shared/bench/ceilings.py does through torch), and the
// time from launch to the first all-reduce (T0 in the environment, as
// torchrun_startup.py). Run under `lf-train launch --nproc-per-node N -- lf-comm-bench`.
#include <ATen/ATen.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "lf/comm/process_group.h"
#include "lf/common/error.h"
#if LF_HAVE_NCCL
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void sync(bool gpu) {
#if LF_HAVE_NCCL
  if (gpu) c10::cuda::device_synchronize();
#endif
  (void)gpu;
}

}  // namespace

int main(int argc, char** argv) try {
  std::vector<int64_t> sizes_mib = {1, 16, 256, 1024};
  int iters = 20;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--iters" && i + 1 < argc) iters = std::atoi(argv[++i]);
    else if (a == "--sizes-mib" && i + 1 < argc) {
      sizes_mib.clear();
      std::string list = argv[++i];
      for (size_t p = 0, q; p < list.size(); p = q + 1) {
        q = list.find(',', p);
        if (q == std::string::npos) q = list.size();
        sizes_mib.push_back(std::stoll(list.substr(p, q - p)));
      }
    }
  }
  auto world = lf::comm::WorldInfo::from_env();
  bool gpu = false;
#if LF_HAVE_NCCL
  gpu = c10::cuda::device_count() > 0;
  if (gpu) c10::cuda::set_device(static_cast<c10::DeviceIndex>(world.local_rank));
#endif
  auto options = at::TensorOptions(at::kBFloat16).device(gpu ? at::Device(at::kCUDA, world.local_rank) : at::kCPU);
  auto comm = lf::comm::make_default_communicator(world, gpu);
  LF_CHECK(comm, lf::ConfigError, "lf-comm-bench needs WORLD_SIZE > 1 (run it under lf-train launch)");
  auto one = at::ones({1}, options);
  comm->all_reduce(one, lf::comm::ReduceOp::kSum)->wait();
  sync(gpu);
  double first_allreduce = now_s();
  std::string result = fmt::format("{{\"backend\": \"{}\", \"world\": {}", comm->backend(), world.world_size);
  if (const char* t0 = std::getenv("T0"))
    result += fmt::format(", \"lf_first_allreduce_s\": {:.3f}", first_allreduce - std::atof(t0));
  for (int64_t mib : sizes_mib) {
    auto x = at::ones({mib * (1 << 20) / 2}, options);
    for (int i = 0; i < 5; ++i) comm->all_reduce(x, lf::comm::ReduceOp::kSum)->wait();
    sync(gpu);
    auto t = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) comm->all_reduce(x, lf::comm::ReduceOp::kSum)->wait();
    sync(gpu);
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count() / iters;
    double busbw = static_cast<double>(x.numel()) * 2 / dt * 2 * (world.world_size - 1) / world.world_size / 1e9;
    result += fmt::format(", \"allreduce_{}MiB_busbw_GBs\": {:.1f}", mib, busbw);
  }
  result += "}";
  if (world.rank == 0) fmt::print("RESULT {}\n", result);
  std::fflush(stdout);
  return 0;
} catch (const lf::Error& e) {
  fmt::print(stderr, "lf-comm-bench: {}\n", e.what());
  return e.exit_code();
}
