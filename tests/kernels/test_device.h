#pragma once
// Where kernels_test / kernels_emu_test run the fused ops: the GPU (test_device_cuda.cpp) or
// the CPU emulation of the same kernel sources (test_device_emu.cpp).
#include <c10/core/Device.h>

namespace lf::kernels::testing {

c10::Device test_device();
bool emulated();

}  // namespace lf::kernels::testing
