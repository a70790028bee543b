// The optimizer registry (optimizer.h): one line per optimizer file.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lf/common/error.h"
#include "lf/optim/adamw.h"
#include "lf/optim/optimizer.h"

namespace lf::optim {

std::unique_ptr<Optimizer> make_muon(const OptimizerInputs& in);       // muon.cpp
std::unique_ptr<Optimizer> make_galore(const OptimizerInputs& in);     // galore.cpp
std::unique_ptr<Optimizer> make_apollo(const OptimizerInputs& in);     // apollo.cpp
std::unique_ptr<Optimizer> make_badam(const OptimizerInputs& in);      // badam.cpp
std::unique_ptr<Optimizer> make_adam_mini(const OptimizerInputs& in);  // adam_mini.cpp
std::unique_ptr<Optimizer> make_adamw_8bit(const OptimizerInputs& in); // adamw_8bit.cpp

const std::vector<OptimizerEntry>& optimizer_registry() {
  using S = StepShape;
  static const std::vector<OptimizerEntry> r = {
      {"adamw", kAdamWSpec, make_adamw},
      {"muon", {"muon", S::kWholeMatrix, "Newton-Schulz orthogonalises each matrix's momentum"}, make_muon},
      {"galore", {"galore", S::kWholeMatrix, "an SVD of each target matrix's gradient"}, make_galore},
      {"apollo", {"apollo", S::kWholeMatrix, "a projection and per-channel norms of each target matrix's gradient"},
       make_apollo},
      {"badam", {"badam", S::kReplicated, "it switches which decoder layer trains every few steps"}, make_badam},
      {"adam_mini", {"adam_mini", S::kWholeMatrix, "a second moment shared by each row, head or tensor"},
       make_adam_mini},
      {"adamw_8bit",
       {"adamw_8bit", S::kWholeMatrix, "8-bit states quantized in blocks of 256 consecutive elements of each tensor"},
       make_adamw_8bit},
  };
  return r;
}

const OptimizerEntry& find_optimizer(std::string_view name) {
  std::vector<std::string_view> names;
  for (const auto& e : optimizer_registry()) {
    if (e.name == name) return e;
    names.push_back(e.name);
  }
  LF_THROW(ConfigError, "optimizer '{}' is not registered (src/optim/optimizer_registry.cpp has {})", name,
           fmt::join(names, ", "));
}

const OptimizerSpec& optimizer_spec(const OptimizerOptions& options, bool loraplus) {
  return find_optimizer(optimizer_name(options, loraplus)).spec;
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerInputs& in) {
  return find_optimizer(optimizer_name(in.options, in.loraplus_lr_ratio > 0 && in.loraplus_lr_ratio != 1.0)).make(in);
}

}  // namespace lf::optim
