// lf_data_cli: the `tokenize` and `preview` subcommands alone (what lf-train
// links), for tests and benchmarks.
#include <CLI/CLI.hpp>
#include <iostream>

#include "lf/common/error.h"
#include "lf/common/log.h"
#include "lf/data/commands.h"

int main(int argc, char** argv) {
  lf::init_logging("lf-train");  // as lf-train: log lines on stderr
  CLI::App app{"lf-train data commands"};
  app.require_subcommand(1);
  lf::add_tokenize_command(app);
  lf::add_preview_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const lf::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return e.exit_code();
  }
  return 0;
}
