// lf-train: the one command users run on every node. Never links libtorch.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "docs_commands.h"
#include "launch_command.h"
#include "train_command.h"
#include "lf/common/error.h"
#include "lf/common/log.h"
#include "lf/common/version.h"
#if LF_HAVE_DATA_COMMANDS
#include "lf/data/commands.h"
#endif

int main(int argc, char** argv) {
  // Writes to a closed pipe (a console that went away) are errors, not deaths.
  ::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"lf-train: distributed LLM fine-tuning launcher and trainer"};
  app.set_version_flag("--version", std::string("lf-train ") + lf::kVersion);
  app.require_subcommand(0, 1);
  lf::add_launch_command(app);
  lf::add_rdzv_server_command(app);
#if LF_HAVE_DATA_COMMANDS
  lf::add_tokenize_command(app);
  lf::add_preview_command(app);
#endif
  lf::add_train_command(app);
  lf::add_docs_commands(app);
  try {
    lf::init_logging("lf-train");  // inside: a malformed LF_LOG_LEVEL is a ConfigError (exit 2)
    // `lf-train CONFIG.yaml ...` is `lf-train train CONFIG.yaml ...` (LLaMA-Factory's two spellings).
    std::vector<std::string> args(argv + 1, argv + argc);
    if (!args.empty() && lf::looks_like_config_path(argv[1])) args.insert(args.begin(), "train");
    std::reverse(args.begin(), args.end());  // CLI11 takes the vector form reversed
    app.parse(args);
    if (!app.get_subcommands().size()) {
      std::fputs(app.help().c_str(), stdout);
      return lf::kExitConfig;
    }
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();  // a command's own exit code
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : lf::kExitConfig;
  } catch (const lf::Error& e) {
    std::fprintf(stderr, "lf-train: error: %s\n", e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lf-train: internal error: %s\n", e.what());
    return lf::kExitInternal;
  }
  return lf::kExitOk;
}
