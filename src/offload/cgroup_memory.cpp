// Finding this process's memory cgroups and the tightest limit among them and
// their ancestors. Hierarchies come from mountinfo (a v1 "cgroup" mount whose
// super options name "memory", or the "cgroup2" mount); the process's place in
// each from /proc/self/cgroup, relative to the mount's root (a container with its
// own cgroup namespace, or a bind mount of its cgroup, sees its cgroup as "/").
#include "lf/offload/cgroup_memory.h"

#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

namespace lf::offload {

namespace {

namespace fs = std::filesystem;

struct Hierarchy {
  bool v2 = false;
  std::string mount_root;   // the cgroup path the mount shows as its top
  std::string mount_point;  // where it is mounted
  std::string process_path; // this process's cgroup path in that hierarchy
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(s);
  while (std::getline(in, item, sep)) out.push_back(item);
  return out;
}

bool has_token(const std::string& list, const std::string& token) {
  for (const auto& t : split(list, ','))
    if (t == token) return true;
  return false;
}

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescape_mount_field(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 4 <= s.size()) {
      int v = 0;
      auto [end, ec] = std::from_chars(s.data() + i + 1, s.data() + i + 4, v, 8);
      if (ec == std::errc() && end == s.data() + i + 4) {
        out.push_back(static_cast<char>(v));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

// Memory hierarchies from mountinfo: "id parent maj:min root mount_point opts [tags] - fstype source super_opts".
std::vector<Hierarchy> memory_mounts(const std::string& mountinfo) {
  std::vector<Hierarchy> out;
  std::ifstream in(mountinfo);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::istringstream words(line);
    for (std::string w; words >> w;) f.push_back(w);
    size_t dash = 6;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (dash + 3 >= f.size()) continue;
    const std::string& fstype = f[dash + 1];
    const std::string& super_options = f[dash + 3];
    const bool v2 = fstype == "cgroup2";
    if (!v2 && !(fstype == "cgroup" && has_token(super_options, "memory"))) continue;
    out.push_back({v2, unescape_mount_field(f[3]), unescape_mount_field(f[4]), ""});
  }
  return out;
}

// The process's path in the v2 hierarchy ("0::/path") or the v1 memory one ("N:...memory...:/path").
std::optional<std::string> process_cgroup_path(const std::string& proc_self_cgroup, bool v2) {
  std::ifstream in(proc_self_cgroup);
  std::string line;
  while (std::getline(in, line)) {
    const auto first = line.find(':');
    const auto second = line.find(':', first == std::string::npos ? 0 : first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string id = line.substr(0, first), controllers = line.substr(first + 1, second - first - 1);
    const bool is_v2 = id == "0" && controllers.empty();
    if (v2 ? is_v2 : (!is_v2 && has_token(controllers, "memory"))) return line.substr(second + 1);
  }
  return std::nullopt;
}

std::optional<std::string> read_first_line(const fs::path& p) {
  std::ifstream in(p);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return line;
}

std::optional<uint64_t> parse_u64(const std::string& s) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end == s.data()) return std::nullopt;
  return v;
}

uint64_t stat_value(const fs::path& stat_file, const std::string& key) {
  std::ifstream in(stat_file);
  std::string k;
  uint64_t v = 0;
  while (in >> k >> v)
    if (k == key) return v;
  return 0;
}

// One cgroup directory's limit, or nullopt when it has none (v2 "max", v1 ~LONG_MAX).
std::optional<CgroupMemoryLimit> limit_at(const fs::path& dir, bool v2) {
  const char* limit_file = v2 ? "memory.max" : "memory.limit_in_bytes";
  const auto text = read_first_line(dir / limit_file);
  if (!text) return std::nullopt;
  const auto limit = parse_u64(*text);
  constexpr uint64_t kV1Unlimited = uint64_t{1} << 62;  // v1 writes LONG_MAX rounded down to a page
  if (!limit || (!v2 && *limit >= kV1Unlimited)) return std::nullopt;
  const uint64_t usage =
      parse_u64(read_first_line(dir / (v2 ? "memory.current" : "memory.usage_in_bytes")).value_or("")).value_or(0);
  const uint64_t inactive_file = stat_value(dir / "memory.stat", v2 ? "inactive_file" : "total_inactive_file");
  return CgroupMemoryLimit{dir.string(), limit_file, *limit, usage > inactive_file ? usage - inactive_file : 0};
}

// The process's directory in the mount: its path with the mount's root taken off;
// nullopt when the mount does not show it (another namespace's view, "/../.." paths),
// since a directory found some other way would be someone else's limit.
std::optional<fs::path> process_dir(const Hierarchy& h) {
  std::string rel = h.process_path;
  if (h.mount_root != "/") {
    const bool below = rel.rfind(h.mount_root, 0) == 0 &&
                       (rel.size() == h.mount_root.size() || rel[h.mount_root.size()] == '/');
    if (!below) return std::nullopt;
    rel = rel.substr(h.mount_root.size());
  }
  fs::path dir(h.mount_point);
  for (const auto& part : split(rel, '/')) {
    if (part == "..") return std::nullopt;
    if (!part.empty() && part != ".") dir /= part;
  }
  return dir.lexically_normal();
}

// The memory hierarchies this process is in and can see itself in, each with its directory.
std::vector<std::pair<Hierarchy, fs::path>> process_hierarchies(const CgroupFiles& files) {
  std::vector<std::pair<Hierarchy, fs::path>> out;
  for (Hierarchy h : memory_mounts(files.proc_self_mountinfo)) {
    const auto path = process_cgroup_path(files.proc_self_cgroup, h.v2);
    if (!path) continue;
    h.process_path = *path;
    if (auto dir = process_dir(h)) out.emplace_back(std::move(h), std::move(*dir));
  }
  return out;
}

}  // namespace

std::vector<MemoryCgroup> process_memory_cgroups(const CgroupFiles& files) {
  std::vector<MemoryCgroup> out;
  for (const auto& [h, dir] : process_hierarchies(files)) out.push_back({h.v2, dir.string()});
  return out;
}

std::optional<CgroupMemoryLimit> tightest_cgroup_memory_limit(const CgroupFiles& files) {
  std::optional<CgroupMemoryLimit> best;
  for (const auto& [h, own] : process_hierarchies(files)) {
    // From the process's cgroup up to the top of the mount: an ancestor's limit binds too.
    const fs::path top = fs::path(h.mount_point).lexically_normal();
    for (fs::path dir = own;; dir = dir.parent_path()) {
      if (auto limit = limit_at(dir, h.v2); limit && (!best || limit->available() < best->available()))
        best = std::move(limit);
      if (dir == top || dir == dir.parent_path() || dir.string().size() <= top.string().size()) break;
    }
  }
  return best;
}

}  // namespace lf::offload
