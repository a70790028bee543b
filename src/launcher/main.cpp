// lf-train: the one command users run on every node. Never links libtorch.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <signal.h>

#include <cstdio>

#include "launch_command.h"
#include "lf/common/error.h"
#include "lf/common/log.h"
#include "lf/common/version.h"
#if LF_HAVE_DATA_COMMANDS
#include "lf/data/commands.h"
#endif

namespace {

bool looks_like_config(const std::string& arg) {
  auto ends_with = [&](const char* s) {
    std::string suffix(s);
    return arg.size() >= suffix.size() && arg.compare(arg.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends_with(".yaml") || ends_with(".yml") || ends_with(".json");
}

[[noreturn]] void training_not_available(const std::string& config) {
  LF_THROW(lf::ConfigError,
           "training ({}) is not available in this build yet: the trainer (lf-worker) lands with the trainer issue. "
           "`lf-train launch -- CMD` runs any torchrun-style program today", config);
}

}  // namespace

int main(int argc, char** argv) {
  // Writes to a closed pipe (a console that went away) are errors, not deaths.
  ::signal(SIGPIPE, SIG_IGN);
  lf::init_logging("lf-train");
  CLI::App app{"lf-train: distributed LLM fine-tuning launcher and trainer"};
  app.set_version_flag("--version", std::string("lf-train ") + lf::kVersion);
  app.require_subcommand(0, 1);
  lf::add_launch_command(app);
  lf::add_rdzv_server_command(app);
#if LF_HAVE_DATA_COMMANDS
  lf::add_tokenize_command(app);
  lf::add_preview_command(app);
#endif
  auto* train = app.add_subcommand("train", "Train from a LLaMA-Factory YAML (lf-train train CONFIG.yaml [key=value ...])");
  std::vector<std::string> train_args;
  train->add_option("args", train_args, "CONFIG.yaml [key=value ...]")->required();
  train->callback([&] { training_not_available(train_args.front()); });
  try {
    // `lf-train CONFIG.yaml ...` is `lf-train train CONFIG.yaml ...`.
    if (argc >= 2 && looks_like_config(argv[1])) training_not_available(argv[1]);
    app.parse(argc, argv);
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
