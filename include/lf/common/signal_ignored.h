#pragma once
// Whether this process ignores a signal (SIG_IGN: SIGHUP under nohup). A handler installed over an
// ignored signal would undo the user's choice: `nohup lf-train ...` must outlive its terminal.
#include <csignal>

namespace lf {

inline bool signal_ignored(int sig) {
  struct sigaction old {};
  return ::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN;
}

}  // namespace lf
