#include "model_spec.h"

namespace lf::model {
namespace {

// Every family lf-train runs: one line each, its spec defined in its own file.
const ModelSpec* const kFamilies[] = {&kLlamaSpec, &kQwen2Spec, &kQwen3Spec, &kMistralSpec};

}  // namespace

const ModelSpec* find_model_spec(const std::string& architecture, const std::string& model_type) {
  for (const auto* f : kFamilies)
    if (architecture == f->architecture || (architecture.empty() && model_type == f->model_type)) return f;
  return nullptr;
}

std::string supported_architectures() {
  std::string s;
  for (const auto* f : kFamilies) s += (s.empty() ? "" : ", ") + std::string(f->architecture);
  return s;
}

const ModelSpec& model_spec(const ModelConfig& c) {
  LF_CHECK(c.spec, ConfigError, "model config '{}' has no family (build it with parse_model_config)",
           c.architecture_name);
  return *c.spec;
}

}  // namespace lf::model
