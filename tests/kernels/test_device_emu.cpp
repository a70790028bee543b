#include "test_device.h"

namespace lf::kernels::testing {

c10::Device test_device() { return {c10::DeviceType::CPU}; }
bool emulated() { return true; }

}  // namespace lf::kernels::testing
