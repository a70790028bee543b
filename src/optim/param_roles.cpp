#include "param_roles.h"

#include <algorithm>

namespace lf::optim {

namespace {

std::string module_of(const std::string& name) {
  const auto dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(0, dot);
}

}  // namespace

bool lf_decays(const std::string& name) { return name.find("bias") == std::string::npos; }

bool is_linear_weight(const NamedTensor& p) {
  return p.tensor.dim() == 2 && p.name.ends_with(".weight") && p.name.find("embed_tokens") == std::string::npos;
}

std::vector<std::string> all_linear_modules(const std::vector<NamedTensor>& params) {
  std::vector<std::string> out;
  for (const auto& p : params) {
    if (!is_linear_weight(p)) continue;
    const auto module = module_of(p.name);
    if (module.find("lm_head") != std::string::npos) continue;
    const auto dot = module.rfind('.');
    auto last = dot == std::string::npos ? module : module.substr(dot + 1);
    if (std::find(out.begin(), out.end(), last) == out.end()) out.push_back(std::move(last));
  }
  return out;
}

std::vector<bool> targeted_params(const std::vector<NamedTensor>& params, const std::vector<std::string>& targets) {
  const auto names = targets.size() == 1 && targets[0] == "all" ? all_linear_modules(params) : targets;
  std::vector<bool> out;
  for (const auto& p : params) {
    const auto module = module_of(p.name);
    out.push_back(is_linear_weight(p) && std::any_of(names.begin(), names.end(), [&](const std::string& t) {
                    return module.find(t) != std::string::npos;
                  }));
  }
  return out;
}

}  // namespace lf::optim
