// Where CUDA graphs of the micro-step apply (src/train/step_graph.h): each refusal says why, and
// LF_CUDA_GRAPHS takes 0 or 1 only. The graphs themselves need a GPU: scripts/device/graphs_check.sh
// trains with them on and off and compares the losses (docs/BENCHMARKS.md).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "../support/scoped_env.h"
#include "step_graph.h"

namespace lf::train {
namespace {

using EnvVar = lf::test::ScopedEnv;

StepGraphSetup eligible() {
  StepGraphSetup s;
  s.device = c10::Device(c10::DeviceType::CUDA, 0);
  s.single_process = true;
  return s;
}

TEST(StepGraph, RefusalsNameTheReason) {
  ::unsetenv("LF_CUDA_GRAPHS");
  EXPECT_EQ(step_graph_refusal(eligible()), "");
  auto cpu = eligible();
  cpu.device = c10::Device(c10::DeviceType::CPU);
  EXPECT_EQ(step_graph_refusal(cpu), "not on a GPU");
  auto ddp = eligible();
  ddp.single_process = false;
  EXPECT_NE(step_graph_refusal(ddp).find("more than one process"), std::string::npos);
  auto dropout = eligible();
  dropout.dropout = true;
  EXPECT_NE(step_graph_refusal(dropout).find("lora_dropout"), std::string::npos);
  auto neat = eligible();
  neat.neat_packing = true;
  EXPECT_NE(step_graph_refusal(neat).find("neat_packing"), std::string::npos);
  {
    const EnvVar off("LF_CUDA_GRAPHS", "0");
    EXPECT_FALSE(cuda_graphs_requested());
    EXPECT_EQ(step_graph_refusal(eligible()), "LF_CUDA_GRAPHS=0");
  }
  const EnvVar on("LF_CUDA_GRAPHS", "1");
  EXPECT_TRUE(cuda_graphs_requested());
}

TEST(StepGraph, BucketWidthIsAMultipleOfEight) {
  ::unsetenv("LF_CUDA_GRAPH_BUCKET");
  EXPECT_EQ(graph_bucket_width(), 128);
  {
    const EnvVar w("LF_CUDA_GRAPH_BUCKET", "64");
    EXPECT_EQ(graph_bucket_width(), 64);
  }
  for (const char* bad : {"100", "0", "-8", "wide"}) {
    const EnvVar w("LF_CUDA_GRAPH_BUCKET", bad);
    EXPECT_THROW(graph_bucket_width(), std::exception) << bad;
  }
}

TEST(StepGraph, BadKnobValueIsAnError) {
  const EnvVar bad("LF_CUDA_GRAPHS", "yes");
  EXPECT_THROW(cuda_graphs_requested(), std::exception);
}

TEST(StepGraph, CpuBuildsAndCpuRunsHaveNoGraph) {
  ::unsetenv("LF_CUDA_GRAPHS");
  auto cpu = eligible();
  cpu.device = c10::Device(c10::DeviceType::CPU);
  EXPECT_EQ(make_micro_step_graph(cpu), nullptr);
}

}  // namespace
}  // namespace lf::train
