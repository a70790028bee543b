// Where CUDA graphs of the micro-step apply (src/train/step_graph.h): each refusal says why. The graphs themselves need a GPU: scripts/device/graphs_check.sh
// trains with them on and off and compares the losses (docs/BENCHMARKS.md).
#include <gtest/gtest.h>

#include <string>

#include "step_graph.h"

namespace lf::train {
namespace {

StepGraphSetup eligible() {
  StepGraphSetup s;
  s.device = c10::Device(c10::DeviceType::CUDA, 0);
  s.single_process = true;
  return s;
}

TEST(StepGraph, RefusalsNameTheReason) {
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
  auto moe = eligible();  // grouped experts: routing and group offsets stay on the device, captured
  EXPECT_EQ(step_graph_refusal(moe), "");
  moe.host_routed_experts = true;  // per-expert GEMMs sized from the routing read on the host
  EXPECT_NE(step_graph_refusal(moe).find("without the grouped GEMM"), std::string::npos);
  auto scaled = eligible();
  scaled.aux_under_scaler = true;
  EXPECT_NE(step_graph_refusal(scaled).find("load-balancing loss under fp16"), std::string::npos);
  auto off = eligible();
  off.requested = false;  // the plan's kernels.cuda_graphs (LF_CUDA_GRAPHS=0; validated in config_test)
  EXPECT_EQ(step_graph_refusal(off), "LF_CUDA_GRAPHS=0");
}

TEST(StepGraph, CpuBuildsAndCpuRunsHaveNoGraph) {
  auto cpu = eligible();
  cpu.device = c10::Device(c10::DeviceType::CPU);
  EXPECT_EQ(make_micro_step_graph(cpu), nullptr);
}

}  // namespace
}  // namespace lf::train
