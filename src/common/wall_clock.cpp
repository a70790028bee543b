#include "lf/common/wall_clock.h"

#include <chrono>

namespace lf {

double wall_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace lf
