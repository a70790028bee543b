// lf-train: the one command users run on every node. Never links libtorch.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <cstdio>
#include <string>
#include <vector>

#include "doctor_command.h"
#include "docs_commands.h"
#include "export_command.h"
#include "launch_command.h"
#include "plan_command.h"
#include "train_command.h"
#include "ui_command.h"
#include "lf/common/edit_distance.h"
#include "lf/common/error.h"
#include "lf/common/log.h"
#include "lf/common/version.h"
#include "lf/config/train_config.h"
#if LF_HAVE_DATA_COMMANDS
#include "lf/data/commands.h"
#endif

namespace {

// The top-level usage names the program and puts the form users run first; CLI11's
// would read "Usage: [OPTIONS] [SUBCOMMAND]".
class TopLevelFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* app, std::string name) const override {
    if (app->get_parent() != nullptr) return CLI::Formatter::make_usage(app, std::move(name));
    return "Usage: lf-train CONFIG.yaml [key=value ...]      train (the same command on every node)\n"
           "       lf-train SUBCOMMAND [OPTIONS] [ARGS ...]    (subcommands below; lf-train SUBCOMMAND --help)\n";
  }
};

// `lf-train export CFG` (a subcommand that does not exist, or a config file without a
// .yaml/.yml/.json name): one line saying what exists, not CLI11's "arguments were not expected".
void check_first_argument(const CLI::App& app, const std::string& first) {
  if (first.empty() || first[0] == '-' || lf::looks_like_config_path(first.c_str())) return;
  std::vector<std::string> names;
  for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(sub->get_name());
  if (std::find(names.begin(), names.end(), first) != names.end()) return;
  std::string closest;
  size_t best = 3;
  for (const auto& n : names)
    if (size_t d = lf::edit_distance(first, n); d < best) best = d, closest = n;
  LF_THROW(lf::ConfigError, "'{}' is not an lf-train subcommand{}; the subcommands are {}, or give a config file "
                            "(lf-train CONFIG.yaml [key=value ...]){}",
           first, closest.empty() ? "" : fmt::format(" (did you mean {}?)", closest), fmt::join(names, ", "),
           std::filesystem::is_regular_file(first) ? " whose name ends in .yaml, .yml or .json" : "");
}

// `lf-train CONFIG --learning_rate 1e-4`: config keys are key=value (LLaMA-Factory's CLI spelling);
// CLI11 alone would say "arguments were not expected".
void check_key_value_spelling(const CLI::App& app, const std::vector<std::string>& args) {
  if (args.empty() || args.front() != "train") return;
  const auto found = app.get_subcommands([](const CLI::App* sub) { return sub->get_name() == "train"; });
  const CLI::App* train = found.empty() ? nullptr : found.front();
  const auto& keys = lf::config::known_keys();
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0 || a.size() < 3) continue;
    const std::string flag = a.substr(0, a.find('='));
    if (train && train->get_option_no_throw(flag)) continue;
    std::string key = flag.substr(2);
    std::replace(key.begin(), key.end(), '-', '_');
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) continue;
    const bool inline_value = a.find('=') != std::string::npos;
    const std::string value = inline_value ? a.substr(a.find('=') + 1) : i + 1 < args.size() ? args[i + 1] : "VALUE";
    LF_THROW(lf::ConfigError, "`{}{}`: config keys are given after the config as key=value, not as flags: write "
                              "{}={} (`lf-train train --help` lists lf-train's own flags)",
             a, inline_value || i + 1 >= args.size() ? "" : " " + args[i + 1], key, value);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Writes to a closed pipe (a console that went away) are errors, not deaths.
  ::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"lf-train: distributed LLM fine-tuning launcher and trainer", "lf-train"};
  app.set_version_flag("--version", std::string("lf-train ") + lf::kVersion);
  app.require_subcommand(0, 1);
  lf::add_launch_command(app);
  lf::add_rdzv_server_command(app);
#if LF_HAVE_DATA_COMMANDS
  lf::add_tokenize_command(app);
  lf::add_preview_command(app);
#endif
  lf::add_train_command(app);
  lf::add_plan_command(app);
  lf::add_doctor_command(app);
  lf::add_export_command(app);
  lf::add_ui_command(app);
  lf::add_docs_commands(app);
  app.formatter(std::make_shared<TopLevelFormatter>());  // after the subcommands: theirs stay CLI11's
  try {
    lf::init_logging("lf-train");  // inside: a malformed LF_LOG_LEVEL is a ConfigError (exit 2)
    // `lf-train CONFIG.yaml ...` is `lf-train train CONFIG.yaml ...` (LLaMA-Factory's two spellings).
    std::vector<std::string> args(argv + 1, argv + argc);
    if (!args.empty() && lf::looks_like_config_path(argv[1])) args.insert(args.begin(), "train");
    if (!args.empty()) check_first_argument(app, args.front());
    check_key_value_spelling(app, args);
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
