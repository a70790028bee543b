// lf-train-local CONFIG.yaml [key=value ...]: runs the trainer in this process (no
// launcher, no agent). lf-worker's `train` subcommand does the same under the agent.
#include <cstdio>
#include <string>
#include <vector>

#include "lf/common/error.h"
#include "lf/common/log.h"
#include "lf/config/train_config.h"
#include "lf/train/run_training.h"

int main(int argc, char** argv) {
  lf::init_logging("train");
  if (argc < 2 || std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help") {
    std::fprintf(stderr, "usage: lf-train-local CONFIG.yaml [key=value ...]\n");
    return argc < 2 ? lf::kExitConfig : lf::kExitOk;
  }
  std::vector<std::string> overrides(argv + 2, argv + argc);
  try {
    const auto loaded = lf::config::load_train_config(argv[1], overrides);
    return lf::train::run_training(loaded);
  } catch (const lf::Error& e) {
    spdlog::error("{}", e.what());
    return e.exit_code();
  }
}
