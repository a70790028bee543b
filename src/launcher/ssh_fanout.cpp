#include "ssh_fanout.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>

#include "lf/agent/console_writer.h"
#include "lf/agent/line_relay.h"
#include "lf/common/env.h"
#include "lf/common/env_knobs.h"
#include "lf/common/error.h"
#include "lf/common/exit_codes.h"

namespace lf {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

volatile sig_atomic_t g_stop = 0;
void on_stop(int sig) { g_stop = sig; }

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Reads the job token from the first line of its stdin (never a command line: `ps` would
// show it), runs "$@" with stdin from /dev/null and sends it SIGTERM once this shell's stdin
// (ssh's channel) ends: ssh killed, the link lost, or the stop here closing it.
constexpr const char* kRemoteWatcher =
    "IFS= read -r LF_JOB_TOKEN; export LF_JOB_TOKEN; unset LF_JOB_TOKEN_FILE; "
    "exec 3<&0; \"$@\" </dev/null & p=$!; (cat <&3 >/dev/null 2>&1; kill -TERM $p 2>/dev/null) & w=$!; "
    "exec 3<&-; wait $p; rc=$?; kill $w 2>/dev/null; exit $rc";

struct Host {
  std::string name;
  pid_t pid = -1;
  int in = -1;  // ssh's stdin: closing it stops the remote agent
  int out = -1, err = -1;
  std::unique_ptr<agent::LineRelay> out_relay, err_relay;
  int code = -1;  // exit code once ssh exited
};

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

void start_ssh(Host& h, const std::vector<std::string>& argv) {
  int in[2], out[2], err[2];
  LF_CHECK(::pipe2(in, O_CLOEXEC) == 0 && ::pipe2(out, O_CLOEXEC) == 0 && ::pipe2(err, O_CLOEXEC) == 0,
           ConfigError, "--hostfile: cannot make pipes for ssh: {}", std::strerror(errno));
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  h.pid = ::fork();
  LF_CHECK(h.pid >= 0, ConfigError, "--hostfile: fork for ssh failed: {}", std::strerror(errno));
  if (h.pid == 0) {
    // A group of its own: the terminal's Ctrl-C comes here, and the stop is ours to make.
    ::setpgid(0, 0);
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::execvp(args[0], args.data());
    const char msg[] = "lf-train: cannot run ssh (is openssh-client installed and on PATH?)\n";
    (void)!::write(2, msg, sizeof msg - 1);
    ::_exit(kExitNetwork);
  }
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  h.in = in[1];
  h.out = out[0];
  h.err = err[0];
  const std::string prefix = "[" + h.name + "] ";
  h.out_relay = std::make_unique<agent::LineRelay>(prefix, 1, nullptr);
  h.err_relay = std::make_unique<agent::LineRelay>(prefix, 2, nullptr);
}

// Reads what is there; false at end of stream.
bool pump(int& fd, agent::LineRelay& relay) {
  char buf[65536];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  if (n > 0) {
    relay.feed({buf, static_cast<size_t>(n)});
    return true;
  }
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  relay.finish();
  close_fd(fd);
  return false;
}

std::vector<std::string> ssh_argv(const std::string& host, const std::string& command) {
  std::vector<std::string> argv = {"ssh", "-o", "BatchMode=yes"};
  std::istringstream extra(knob_string("LF_SSH_ARGS").value_or(""));
  for (std::string w; extra >> w;) argv.push_back(w);
  argv.push_back(host);
  argv.push_back(command);
  return argv;
}

}  // namespace

std::vector<std::string> without_fanout_flags(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {  // the command of `launch`: its own flags are not ours
      out.insert(out.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    if (a == "--hostfile" || a == "--env") {
      ++i;
      continue;
    }
    if (a.rfind("--hostfile=", 0) == 0 || a.rfind("--env=", 0) == 0) continue;
    out.push_back(a);
  }
  return out;
}

std::vector<std::string> remote_environment(const SshFanoutOptions& o, size_t i) {
  std::vector<std::string> env;
  for (const auto& [name, value] : environment_map()) {
    const bool forwarded = name.rfind("NCCL_", 0) == 0 || name.rfind("LF_", 0) == 0 || name == "CUDA_VISIBLE_DEVICES";
    // LLaMA-Factory's job variables, except those each host gets from the hostfile.
    const bool job = name == "MASTER_PORT" || name == "MAX_RESTARTS" || name == "RDZV_ID" ||
                     (name == "NPROC_PER_NODE" && o.hosts[i].slots < 0);
    // The token travels on ssh's stdin (kRemoteWatcher), never on a command line.
    const bool secret = name == "LF_JOB_TOKEN" || name == "LF_JOB_TOKEN_FILE";
    if ((forwarded || job) && name != "LF_SSH_ARGS" && !secret) env.push_back(name + "=" + value);
  }
  for (const auto& e : o.env) {
    if (e.find('=') != std::string::npos) {
      env.push_back(e);
      continue;
    }
    auto v = env_string(e.c_str());
    LF_CHECK(v.has_value(), ConfigError, "--env {}: {} is not set here (give --env {}=VALUE, or export it)", e, e, e);
    env.push_back(e + "=" + *v);
  }
  env.push_back("NNODES=" + std::to_string(o.hosts.size()));
  env.push_back("NODE_RANK=" + std::to_string(i));
  env.push_back("MASTER_ADDR=" + o.hosts.front().host);
  if (o.hosts[i].slots > 0) env.push_back("NPROC_PER_NODE=" + std::to_string(o.hosts[i].slots));
  return env;
}

std::string remote_command(const SshFanoutOptions& o, size_t i, const std::string& exe, const std::string& cwd) {
  std::string cmd = "cd " + shell_quote(cwd) + " && exec sh -c " + shell_quote(kRemoteWatcher) + " lf-train env";
  for (const auto& e : remote_environment(o, i)) cmd += " " + shell_quote(e);
  cmd += " " + shell_quote(exe);
  for (const auto& a : o.args) cmd += " " + shell_quote(a);
  return cmd;
}

int run_over_ssh(const SshFanoutOptions& o) {
  for (const auto& h : o.hosts)
    LF_CHECK(h.slots == o.hosts.front().slots, ConfigError,
             "--hostfile: every host runs the same number of workers (lf-train's nodes agree on nproc), but {} has "
             "slots={} and {} has slots={}",
             o.hosts.front().host, o.hosts.front().slots, h.host, h.slots);
  const std::string exe = fs::read_symlink("/proc/self/exe").string();
  const std::string cwd = fs::current_path().string();
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);

  std::vector<Host> hosts(o.hosts.size());
  for (size_t i = 0; i < hosts.size(); ++i) {
    hosts[i].name = o.hosts[i].host;
    start_ssh(hosts[i], ssh_argv(o.hosts[i].host, remote_command(o, i, exe, cwd)));
    // The remote shell's first line of stdin (a pipe this small never blocks).
    const std::string line = o.token + "\n";
    LF_CHECK(::write(hosts[i].in, line.data(), line.size()) == static_cast<ssize_t>(line.size()), NetworkError,
             "--hostfile: cannot hand the job token to ssh for {}: {}", hosts[i].name, std::strerror(errno));
  }
  spdlog::info("--hostfile: started lf-train on {} host(s) over ssh; MASTER_ADDR={}", hosts.size(),
               o.hosts.front().host);
  int first_failure = 0;
  std::string failed_host;
  bool stopping = false;
  Clock::time_point kill_at = Clock::time_point::max();
  auto stop_all = [&](const char* why) {
    if (stopping) return;
    stopping = true;
    spdlog::warn("--hostfile: {}: stopping the agents on every host", why);
    for (auto& h : hosts) close_fd(h.in);
    kill_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.stop_grace_s + 10));
  };
  for (;;) {
    if (g_stop) stop_all(::strsignal(g_stop));
    std::vector<pollfd> fds;
    std::vector<std::pair<Host*, bool>> who;  // host, stdout?
    for (auto& h : hosts) {
      if (h.out >= 0) fds.push_back({h.out, POLLIN, 0}), who.emplace_back(&h, true);
      if (h.err >= 0) fds.push_back({h.err, POLLIN, 0}), who.emplace_back(&h, false);
    }
    bool running = false;
    for (auto& h : hosts) running |= h.code < 0;
    if (!running && fds.empty()) break;
    ::poll(fds.data(), fds.size(), 200);
    for (size_t k = 0; k < fds.size(); ++k)
      if (fds[k].revents) who[k].second ? pump(who[k].first->out, *who[k].first->out_relay)
                                        : pump(who[k].first->err, *who[k].first->err_relay);
    for (auto& h : hosts) {
      int status = 0;
      if (h.code >= 0 || ::waitpid(h.pid, &status, WNOHANG) != h.pid) continue;
      h.code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
      close_fd(h.in);
      if (h.code == 0 || stopping) continue;
      first_failure = h.code == 255 ? kExitNetwork : h.code;
      failed_host = h.name;
      spdlog::error("--hostfile: {} ended with exit {}{}", h.name, h.code,
                    h.code == 255 ? fmt::format(" (ssh could not run it: check that `ssh -o BatchMode=yes {} true` "
                                                "works without a password)", h.name)
                                  : "");
      stop_all("a host failed");
    }
    if (Clock::now() >= kill_at) {
      for (auto& h : hosts)
        if (h.code < 0) ::kill(-h.pid, SIGKILL);
      kill_at = Clock::time_point::max();
    }
  }
  agent::drain_console(std::chrono::seconds(5));
  if (g_stop) return 128 + g_stop;
  return first_failure;
}

}  // namespace lf
