#include "config_reader.h"

#include <fmt/format.h>

#include <sstream>

namespace lf::config {

std::string scalar_text(const YAML::Node& n) {
  if (n.IsScalar()) return n.Scalar();
  if (n.IsNull()) return "";
  YAML::Emitter e;
  e << YAML::Flow << n;
  return e.c_str();
}

std::string Reader::quote(const std::string& key) const {
  return fmt::format("{}: `{}: {}`", where(key), key, text(key));
}

void Reader::read_list(const std::string& key, std::vector<std::string>& out) const {
  if (!has(key)) return;
  const YAML::Node& n = node(key);
  out.clear();
  auto add = [&](const std::string& s) {
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ',')) {
      auto b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
      if (b != std::string::npos) out.push_back(item.substr(b, e - b + 1));
    }
  };
  if (n.IsSequence())
    for (const auto& item : n) add(scalar_text(item));
  else
    add(scalar_text(n));
}

}  // namespace lf::config
