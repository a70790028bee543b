#pragma once
// Turns a worker's byte stream into whole lines prefixed with its rank
// ("[rank 3] ..."), each written with one write() so lines from different
// workers never interleave mid-line, to the console and/or a log file.
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>

namespace lf::agent {

class LineRelay {
 public:
  // console_fd < 0: no console copy; log may be null.
  LineRelay(std::string prefix, int console_fd, FILE* log) : prefix_(std::move(prefix)), console_fd_(console_fd), log_(log) {}
  void feed(std::string_view bytes);
  // End of stream: a last line without '\n' is still emitted.
  void finish();
  // Also hands every whole line (without the prefix) to `tap` (the node status keeps the last ones).
  void set_tap(std::function<void(std::string_view)> tap) { tap_ = std::move(tap); }

 private:
  void emit(std::string_view line);
  std::string prefix_;
  int console_fd_;
  FILE* log_;
  std::string partial_;
  std::function<void(std::string_view)> tap_;
};

}  // namespace lf::agent
