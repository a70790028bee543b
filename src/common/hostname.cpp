#include "lf/common/hostname.h"

#include <unistd.h>

namespace lf {

std::string this_hostname() {
  char buf[256] = {};  // gethostname may leave a truncated name unterminated: the last byte stays 0
  ::gethostname(buf, sizeof(buf) - 1);
  return buf;
}

}  // namespace lf
