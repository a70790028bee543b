#pragma once
// The device this worker computes on: GPU LOCAL_RANK (modulo the visible GPUs, so
// CUDA_VISIBLE_DEVICES=<one GPU> works too), made the current device; else the CPU.
// One choice for training (run_training.cpp) and predict runs (predict_run.cpp).
#include <c10/core/Device.h>

namespace lf::train {
c10::Device pick_device();
}  // namespace lf::train
