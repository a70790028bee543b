#include "docs_commands.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>

#include "lf/common/env_knobs.h"
#include "lf/config/key_docs.h"

namespace lf {

void add_docs_commands(CLI::App& app) {
  auto markdown = std::make_shared<bool>(false);
  auto* env = app.add_subcommand("env", "List lf-train's own environment knobs (LF_*): default, meaning, value now");
  env->add_flag("--markdown", *markdown, "The README's table (no current values)");
  env->callback([markdown] {
    std::fputs((*markdown ? env_knobs_markdown() : env_knobs_text()).c_str(), stdout);
  });
  app.add_flag_callback(
      "--help-env", [] {
        std::fputs(env_knobs_text().c_str(), stdout);
        throw CLI::Success();
      },
      "List lf-train's own environment knobs (as `lf-train env`) and exit");

  auto keys_markdown = std::make_shared<bool>(false);
  auto keys_json = std::make_shared<bool>(false);
  auto* keys = app.add_subcommand(
      "keys", "List every config key lf-train knows: implemented, accepted without effect, or refused (and why)");
  keys->add_flag("--markdown", *keys_markdown, "The README's sections");
  keys->add_flag("--json", *keys_json, "Every key with its policy, sample value and observable (for scripts)");
  keys->callback([keys_markdown, keys_json] {
    std::fputs((*keys_json       ? config::config_keys_json()
                : *keys_markdown ? config::config_keys_markdown()
                                 : config::config_keys_text())
                   .c_str(),
               stdout);
  });
}

}  // namespace lf
