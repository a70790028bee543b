#include "retry_loop.h"

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "lf/common/error.h"
#include "lf/common/exit_codes.h"
#include "lf/common/signal_ignored.h"
#include "retry_resume.h"

namespace lf {

namespace fs = std::filesystem;

namespace {

volatile sig_atomic_t g_signal = 0;
volatile pid_t g_child = 0;

// Ctrl-C reaches only this process (the child has a process group of its own, so the
// agent sees one SIGINT, not the terminal's and ours): pass it on once, and stop retrying.
void on_stop_signal(int sig) {
  g_signal = sig;
  if (g_child > 0) ::kill(g_child, sig);
}

// nohup's ignored SIGHUP stays ignored, here and in the attempts (signal_ignored.h).
bool g_hangup_ignored = false;

void install_stop_handlers() {
  g_hangup_ignored = signal_ignored(SIGHUP);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP})
    if (sig != SIGHUP || !g_hangup_ignored) ::sigaction(sig, &sa, nullptr);
}

// One attempt: this binary with `args`; returns its exit code (128 + signal when killed).
int run_attempt(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  static const std::string self = "lf-train";
  argv.push_back(const_cast<char*>(self.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  LF_CHECK(pid >= 0, ConfigError, "retry: cannot start an attempt: fork failed: {}", std::strerror(errno));
  if (pid == 0) {
    // Child: async-signal-safe calls only. Its own group; it dies with its supervisor.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(128 + SIGTERM);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig : {SIGINT, SIGTERM, SIGHUP})
      if (sig != SIGHUP || !g_hangup_ignored) ::sigaction(sig, &dfl, nullptr);
    ::execv("/proc/self/exe", argv.data());
    ::_exit(kExitInternal);
  }
  g_child = pid;
  if (g_signal) ::kill(pid, g_signal);  // a stop that came while forking
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  g_child = 0;
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

// Sleeps `seconds`, or less when a stop signal comes.
void wait_unless_stopped(double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!g_signal && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

// The key=value arguments that make attempt n >= 2 continue where the last one stopped.
std::vector<std::string> resume_overrides(const RetryResume& resume, const config::JobPlan& c) {
  if (auto ckpt = resume.newest_written_since(); !ckpt.empty())
    return {"resume_from_checkpoint=" + fs::absolute(ckpt).string()};
  // No checkpoint of ours yet: start over. Everything in a folder that started empty is an
  // earlier attempt's (overwrite_output_dir: false would refuse the non-empty folder).
  if (!c.output.overwrite_output_dir && resume.started_empty()) return {"overwrite_output_dir=true"};
  return {};
}

}  // namespace

bool is_retryable_exit(int code) {
  if (code > 128 && code < 128 + 65) return code != 128 + SIGINT && code != 128 + SIGTERM;
  return code >= kExitRendezvous && code <= kExitBackend;
}

std::string describe_exit(int code) {
  switch (code) {
    case kExitOk: return "0 (success)";
    case kExitInternal: return "1 (internal error)";
    case kExitConfig: return "2 (configuration or data error)";
    case kExitRendezvous: return "10 (rendezvous failed)";
    case kExitNetwork: return "11 (network failure)";
    case kExitTimeout: return "12 (a deadline passed)";
    case kExitAborted: return "13 (another node failed)";
    case kExitWorkerFailed: return "14 (a worker on this node failed)";
    case kExitBackend: return "15 (NCCL / CUDA / Gloo failure)";
    default: break;
  }
  // "137 (killed by signal 9, SIGKILL: Killed)": strsignal alone reads "killed by Killed".
  if (code > 128 && code < 128 + 65) {
    const int sig = code - 128;
    const char* abbrev = ::sigabbrev_np(sig);
    return fmt::format("{} (killed by signal {}{}: {}{})", code, sig, abbrev ? fmt::format(", SIG{}", abbrev) : "",
                       ::strsignal(sig), sig == SIGKILL ? "; the OOM killer, or kill -9" : "");
  }
  return std::to_string(code);
}

std::vector<std::string> without_retry_flags(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--retries" || a == "--retry-wait") {
      ++i;  // and its value
      continue;
    }
    if (a.rfind("--retries=", 0) == 0 || a.rfind("--retry-wait=", 0) == 0) continue;
    out.push_back(a);
  }
  return out;
}

int run_with_retries(const RetryOptions& o, const config::JobPlan& c, const std::vector<std::string>& args) {
  const RetryResume resume(c.output.output_dir);
  const auto base = without_retry_flags(args);
  const int64_t attempts = o.retries + 1;
  install_stop_handlers();
  std::vector<std::string> extra;
  int code = kExitInternal;
  for (int64_t n = 1; n <= attempts; ++n) {
    std::vector<std::string> attempt_args = base;
    attempt_args.insert(attempt_args.end(), extra.begin(), extra.end());
    spdlog::info("retry: attempt {} of {}{}", n, attempts, extra.empty() ? "" : " with " + fmt::format("{}", extra[0]));
    code = run_attempt(attempt_args);
    if (code == kExitOk) {
      spdlog::info("retry: attempt {} of {} succeeded", n, attempts);
      return code;
    }
    if (g_signal) {
      spdlog::warn("retry: attempt {} ended with exit {} after {}: not retried", n, describe_exit(code),
                   ::strsignal(g_signal));
      return code;
    }
    if (!is_retryable_exit(code)) {
      spdlog::error("retry: attempt {} of {} ended with exit {}: not retried ({})", n, attempts, describe_exit(code),
                    code == kExitConfig ? "the same input would fail the same way; fix what the message above names"
                                        : "not a failure of a node, the network or a deadline");
      return code;
    }
    if (n == attempts) {
      spdlog::error("retry: attempt {} of {} ended with exit {}; no retry left (--retries {})", n, attempts,
                    describe_exit(code), o.retries);
      return code;
    }
    extra = resume_overrides(resume, c);
    spdlog::warn("retry: attempt {} of {} ended with exit {}; attempt {} in {} s, {}", n, attempts, describe_exit(code),
                 n + 1, o.retry_wait_s,
                 extra.empty() || extra[0].rfind("resume_from_checkpoint=", 0) != 0
                     ? std::string("starting over (no checkpoint of this run yet)")
                     : "resuming from " + extra[0].substr(23));
    wait_unless_stopped(o.retry_wait_s);
    if (g_signal) return 128 + g_signal;
  }
  return code;
}

}  // namespace lf
