#pragma once
// This process's arguments after argv[0], as given (from /proc/self/cmdline): the retry loop
// runs them again, the hostfile fan-out runs them on every host.
#include <string>
#include <vector>

namespace lf {

std::vector<std::string> own_arguments();

}  // namespace lf
