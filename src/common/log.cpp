#include "lf/common/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include "lf/common/env_knobs.h"

namespace lf {

void init_logging(const std::string& name) {
  auto logger = spdlog::stderr_color_mt(name);
  logger->set_pattern("[%H:%M:%S.%e] [%n] %^%l%$: %v");
  logger->set_level(spdlog::level::info);
  spdlog::set_default_logger(logger);
  // spdlog reads an unknown name as "off": the registry's choices refuse it instead.
  logger->set_level(spdlog::level::from_str(knob_string("LF_LOG_LEVEL").value()));
}

}  // namespace lf
