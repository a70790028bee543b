#include "hostfile.h"

#include <fstream>
#include <set>
#include <sstream>

#include "lf/common/error.h"

namespace lf {

namespace {

int64_t parse_slots(const std::string& value, const std::string& where) {
  size_t used = 0;
  int64_t n = -1;
  try {
    n = std::stoll(value, &used);
  } catch (const std::exception&) {
  }
  LF_CHECK(used == value.size() && n >= 1, ConfigError, "{}: slots={} must be a whole number >= 1 (worker01 slots=4)",
           where, value);
  return n;
}

}  // namespace

std::vector<HostEntry> read_hostfile(const std::string& path) {
  std::ifstream in(path);
  LF_CHECK(in.good(), ConfigError, "--hostfile {}: cannot read it (expected lines such as `worker01 slots=4`)", path);
  std::vector<HostEntry> hosts;
  std::set<std::string> seen;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    HostEntry e;
    if (!(words >> e.host)) continue;  // blank or a comment
    const std::string where = path + ":" + std::to_string(number);
    for (std::string w; words >> w;) {
      LF_CHECK(w.rfind("slots=", 0) == 0 && e.slots < 0, ConfigError,
               "{}: '{}' is not understood: a line is HOST [slots=N] (DeepSpeed's hostfile format)", where, w);
      e.slots = parse_slots(w.substr(6), where);
    }
    LF_CHECK(seen.insert(e.host).second, ConfigError, "{}: host {} is listed twice", where, e.host);
    hosts.push_back(std::move(e));
  }
  LF_CHECK(!hosts.empty(), ConfigError, "--hostfile {} names no host (expected lines such as `worker01 slots=4`)", path);
  return hosts;
}

}  // namespace lf
