#pragma once
// The commands that print lf-train's own registries: `lf-train env` (every LF_*
// environment knob, with the values set now; `--help-env` is the same) and
// `lf-train keys` (every config key: implemented, no effect or refused, and the
// DeepSpeed / FSDP keys). `--markdown` prints the README's generated sections.
namespace CLI {
class App;
}

namespace lf {

void add_docs_commands(CLI::App& app);

}  // namespace lf
