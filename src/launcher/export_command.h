#pragma once
// `lf-train export CONFIG.yaml [key=value ...]` (LLaMA-Factory's `llamafactory-cli export`):
// merges a LoRA adapter into its base and writes a Hugging Face model folder (export_model.h).
namespace CLI {
class App;
}

namespace lf {

void add_export_command(CLI::App& app);

}  // namespace lf
