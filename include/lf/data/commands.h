#pragma once
// CLI11 subcommands of lf-train owned by the data pipeline. Each adds its
// subcommand with a callback that does the work; errors propagate as
// lf::ConfigError for main() to map to an exit code.
//   lf-train tokenize --tokenizer DIR [--special] [--decode] [--skip-special]
//                     [--threads N] [--flavor tokenizers|transformers]
//       JSONL on stdin ({"text": ...} or with --decode {"ids": [...]}) ->
//       JSONL on stdout ({"ids": [...]} / {"text": ...}), in input order.
//   lf-train preview CONFIG.yaml [--n 3] [key=value ...]
//       prints decoded training samples with the masked (untrained) spans marked.
namespace CLI {
class App;
}

namespace lf {

void add_tokenize_command(CLI::App& app);
void add_preview_command(CLI::App& app);

}  // namespace lf
