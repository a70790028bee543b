#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "lf/agent/console_writer.h"
#include "lf/agent/gpu_inventory.h"
#include "lf/agent/line_relay.h"
#include "lf/agent/worker_env.h"
#include "lf/agent/worker_process.h"
#include "lf/common/error.h"

using namespace lf::agent;

TEST(GpuInventory, CudaVisibleDevicesWinsOverTheDriver) {
  auto dir = std::filesystem::temp_directory_path() / ("lf-gpus-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const char* bus : {"0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "0000:04:00.0"})
    std::filesystem::create_directories(dir / bus);
  EXPECT_EQ(visible_gpu_count(std::nullopt, dir), 4);
  EXPECT_EQ(visible_gpu_count(std::string("0,2,3"), dir), 3);
  EXPECT_EQ(visible_gpu_count(std::string(""), dir), 0);
  EXPECT_EQ(visible_gpu_count(std::string("-1"), dir), 0);
  EXPECT_EQ(visible_gpu_count(std::string("1,-1,2"), dir), 1);
  EXPECT_EQ(visible_gpu_count(std::nullopt, dir / "missing"), 0);
  // From the environment: set but empty hides every GPU (it once counted as unset: all 4).
  ::setenv("CUDA_VISIBLE_DEVICES", "", 1);
  EXPECT_EQ(visible_gpu_count_from_env(dir), 0);
  ::setenv("CUDA_VISIBLE_DEVICES", "3,1", 1);
  EXPECT_EQ(visible_gpu_count_from_env(dir), 2);
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(visible_gpu_count_from_env(dir), 4);
  std::filesystem::remove_all(dir);
}

TEST(LineRelay, EmitsWholePrefixedLinesOnlyAndFlushesTheTail) {
  char path[] = "/tmp/lf-relay-XXXXXX";
  int fd = ::mkstemp(path);
  {
    LineRelay relay("[rank 7] ", fd, nullptr);
    relay.feed("hel");
    relay.feed("lo\nwor");
    relay.feed("ld\n\nlast");
    relay.finish();
  }
  ASSERT_TRUE(drain_console(std::chrono::seconds(5)));  // the console is written by a thread of its own
  ::close(fd);
  std::ifstream in(path);
  std::string all((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(all, "[rank 7] hello\n[rank 7] world\n[rank 7] \n[rank 7] last\n");
  ::unlink(path);
}

TEST(WorkerEnv, TorchrunVariablesFromTheLayout) {
  WorkerEnvContext ctx;
  ctx.layout.node_rank = 1;
  ctx.layout.nnodes = 2;
  ctx.layout.rank_base = 4;
  ctx.layout.world_size = 8;
  ctx.layout.nproc = 4;
  ctx.layout.generation = 2;
  ctx.layout.max_restarts = 3;
  ctx.layout.worker_master_port = 1234;
  ctx.master_addr = "10.1.1.1";
  ctx.run_id = "job";
  auto env = worker_environment({{"OMP_NUM_THREADS", "8"}, {"NCCL_DEBUG", "INFO"}}, ctx, 3);
  EXPECT_EQ(env["RANK"], "7");
  EXPECT_EQ(env["LOCAL_RANK"], "3");
  EXPECT_EQ(env["GROUP_RANK"], "1");
  EXPECT_EQ(env["MASTER_ADDR"], "10.1.1.1");
  EXPECT_EQ(env["MASTER_PORT"], "1234");
  EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "2");
  EXPECT_EQ(env["OMP_NUM_THREADS"], "8");  // the user's choice stands
  EXPECT_EQ(env["NCCL_DEBUG"], "INFO");
}

TEST(WorkerProcess, ResolvesCommandsLikeExecvp) {
  EXPECT_EQ(resolve_executable("sh", "/nonexistent:/bin:/usr/bin"), "/bin/sh");
  EXPECT_THROW(resolve_executable("no-such-cmd-xyz", "/bin:/usr/bin"), lf::ConfigError);
  char path[] = "/tmp/lf-noexec-XXXXXX";
  int fd = ::mkstemp(path);  // mode 0600: not executable, even for root
  ::close(fd);
  EXPECT_THROW(resolve_executable(path, "/bin"), lf::ConfigError);
  ::unlink(path);
}
