#include "lf/agent/line_relay.h"

#include "lf/agent/console_writer.h"

namespace lf::agent {

namespace {
// A worker printing megabytes without a newline must not grow the agent without bound.
constexpr size_t kMaxLine = 64 * 1024;
}  // namespace

void LineRelay::feed(std::string_view bytes) {
  while (!bytes.empty()) {
    auto nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      partial_.append(bytes);
      if (partial_.size() >= kMaxLine) {
        emit(partial_);
        partial_.clear();
      }
      return;
    }
    if (partial_.empty()) {
      emit(bytes.substr(0, nl));
    } else {
      partial_.append(bytes.substr(0, nl));
      emit(partial_);
      partial_.clear();
    }
    bytes.remove_prefix(nl + 1);
  }
}

void LineRelay::finish() {
  if (!partial_.empty()) emit(partial_);
  partial_.clear();
  if (log_) std::fflush(log_);
}

void LineRelay::emit(std::string_view line) {
  if (tap_) tap_(line);
  if (log_) {
    std::fwrite(line.data(), 1, line.size(), log_);
    std::fputc('\n', log_);
  }
  if (console_fd_ >= 0) {
    std::string out;
    out.reserve(prefix_.size() + line.size() + 1);
    out.append(prefix_).append(line).push_back('\n');
    write_to_console(console_fd_, std::move(out));  // never blocks the io thread on a slow console
  }
}

}  // namespace lf::agent
