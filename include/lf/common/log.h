#pragma once
// Logging: spdlog with one pattern for every lf-train process. Thread-safe.
#include <spdlog/spdlog.h>

#include <string>

namespace lf {

// Sets the default logger's name (shown in every line, e.g. "agent n1") and the
// level from LF_LOG_LEVEL (trace|debug|info|warn|error|critical|off; default info).
// A value that is none of those is a ConfigError (after the logger is set up at info,
// so the error itself can be logged).
void init_logging(const std::string& name);

}  // namespace lf
