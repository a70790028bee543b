#pragma once
// This machine's host name (gethostname), "" when it cannot be read.
#include <string>

namespace lf {

std::string this_hostname();

}  // namespace lf
