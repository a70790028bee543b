// Must NOT compile (ctest env_knob_*_does_not_compile builds it and expects the error that
// names the reason): a knob that is not registered, or a registered one read with the wrong
// accessor. LF_KNOB_CASE picks which.
#include "lf/common/env_knobs.h"

int main() {
#if LF_KNOB_CASE == 1
  return static_cast<int>(lf::knob_int("LF_NOT_REGISTERED").value_or(0));
#else
  return static_cast<int>(lf::knob_int("LF_LOG_LEVEL").value_or(0));  // a choice, not an integer
#endif
}
