#include "lf/common/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include "lf/common/env.h"

namespace lf {

void init_logging(const std::string& name) {
  auto logger = spdlog::stderr_color_mt(name);
  logger->set_pattern("[%H:%M:%S.%e] [%n] %^%l%$: %v");
  auto level = env_string("LF_LOG_LEVEL").value_or("info");
  logger->set_level(spdlog::level::from_str(level));
  spdlog::set_default_logger(logger);
}

}  // namespace lf
