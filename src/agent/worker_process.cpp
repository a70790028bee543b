#include "lf/agent/worker_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <fstream>
#include <filesystem>

#include "lf/common/error.h"

namespace lf::agent {

namespace {

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

void set_nonblocking_cloexec(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);
}

}  // namespace

std::vector<pid_t> live_children_of(pid_t parent) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc", ec); !ec && it != std::filesystem::end(it);
       it.increment(ec)) {
    const auto name = it->path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(it->path() / "stat");
    std::string stat;
    if (!std::getline(in, stat)) continue;  // gone meanwhile
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses; the last ')' ends it.
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    char state = 0;
    pid_t ppid = 0;
    if (rest >> state >> ppid && ppid == parent && state != 'Z') out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return out;
}

char process_state(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return 0;
  const auto close = stat.rfind(')');  // comm may hold spaces and parentheses
  return close != std::string::npos && close + 2 < stat.size() ? stat[close + 2] : 0;
}

std::string describe_process_state(char state) {
  const char* what = "?";
  switch (state) {
    case 'R': what = "running"; break;
    case 'S': what = "sleeping"; break;
    case 'D': what = "uninterruptible wait: I/O?"; break;
    case 'T': what = "stopped"; break;
    case 't': what = "stopped by a debugger"; break;
    case 'Z': what = "exited, not yet reaped"; break;
  }
  return fmt::format("{} ({})", state, what);
}

std::string resolve_executable(const std::string& command, const std::string& path_env) {
  LF_CHECK(!command.empty(), ConfigError, "no command given to run on the workers (expected `-- CMD ARGS...`)");
  if (command.find('/') != std::string::npos) {
    LF_CHECK(is_executable_file(command), ConfigError, "worker command '{}' does not exist or is not executable",
             command);
    return command;
  }
  size_t start = 0;
  while (start <= path_env.size()) {
    size_t end = path_env.find(':', start);
    if (end == std::string::npos) end = path_env.size();
    std::string dir = path_env.substr(start, end - start);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + command;
    if (is_executable_file(candidate)) return candidate;
    start = end + 1;
  }
  LF_THROW(ConfigError, "worker command '{}' not found in PATH ({})", command, path_env);
}

namespace {

// What the child of fork() needs, prepared before the fork: after it only syscalls run.
struct ChildSetup {
  const char* exe;
  char* const* argv;
  char* const* envp;
  int out_w, err_w, hb_w;  // become 1, 2 and hb_target
  int hb_target;
  int status_w;  // above hb_target: exec's errno goes here when execve fails
  pid_t parent;
};

// The child: its own process group, killed with the agent, default signals, the pipes in
// place, every other descriptor closed, then exec. Async-signal-safe calls only.
[[noreturn]] void exec_in_child(const ChildSetup& c) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != c.parent) ::_exit(127);  // the agent died before prctl took effect
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; ++s) ::sigaction(s, &dfl, nullptr);
  ::dup2(c.out_w, 1);
  ::dup2(c.err_w, 2);
  ::dup2(c.hb_w, c.hb_target);  // dup2 clears FD_CLOEXEC on the copy
  if (c.status_w > c.hb_target + 1) ::syscall(SYS_close_range, c.hb_target + 1, c.status_w - 1, 0);
  ::syscall(SYS_close_range, c.status_w + 1, ~0U, 0);
  int null_fd = ::open("/dev/null", O_RDONLY);
  if (null_fd >= 0) {
    ::dup2(null_fd, 0);
    if (null_fd > 2 && null_fd != c.hb_target) ::close(null_fd);
  }
  ::execve(c.exe, c.argv, c.envp);
  int e = errno;
  ssize_t ignored = ::write(c.status_w, &e, sizeof e);
  (void)ignored;
  ::_exit(e == ENOENT ? 127 : 126);
}

// The errno the child wrote when its exec failed; 0 when the exec succeeded (EOF).
int read_exec_errno(int status_r) {
  int exec_errno = 0;
  ssize_t got;
  do {
    got = ::read(status_r, &exec_errno, sizeof exec_errno);
  } while (got < 0 && errno == EINTR);
  ::close(status_r);
  return got == static_cast<ssize_t>(sizeof exec_errno) ? exec_errno : 0;
}

}  // namespace

SpawnedProcess spawn_worker(const SpawnSpec& spec) {
  auto path_it = spec.env.find("PATH");
  std::string exe = resolve_executable(spec.argv.at(0), path_it == spec.env.end() ? "/usr/bin:/bin" : path_it->second);

  // Everything the child touches is prepared here: after fork it may only make syscalls.
  std::vector<char*> argv;
  for (auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (auto& [k, v] : spec.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  int out[2], err[2], hb[2];
  LF_CHECK(::pipe2(out, O_CLOEXEC) == 0 && ::pipe2(err, O_CLOEXEC) == 0 &&
               ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, hb) == 0,
           BackendError, "cannot create pipes for a worker: {}", std::strerror(errno));
  const pid_t parent = ::getpid();
  const int hb_target = spec.heartbeat_fd_number;
  // exec's outcome: the child writes errno here when execve fails; a successful exec closes
  // it (close-on-exec), so the parent reads EOF. Above hb_target, where the child keeps it.
  int status[2];
  LF_CHECK(::pipe2(status, O_CLOEXEC) == 0, BackendError, "cannot create a pipe for a worker: {}",
           std::strerror(errno));
  const int status_w = ::fcntl(status[1], F_DUPFD_CLOEXEC, hb_target + 1);
  ::close(status[1]);

  pid_t pid = ::fork();
  if (pid == 0)
    exec_in_child({exe.c_str(), argv.data(), envp.data(), out[1], err[1], hb[1], hb_target, status_w, parent});
  int fork_errno = errno;
  ::close(out[1]);
  ::close(err[1]);
  ::close(hb[1]);
  ::close(status_w);
  auto close_read_ends = [&] {
    for (int fd : {out[0], err[0], hb[0]}) ::close(fd);
  };
  if (pid < 0) {
    close_read_ends();
    ::close(status[0]);
    LF_THROW(BackendError, "fork failed: {}", std::strerror(fork_errno));
  }
  if (const int exec_errno = read_exec_errno(status[0])) {  // the exec failed: not a worker failure to restart
    ::waitpid(pid, nullptr, 0);
    close_read_ends();
    LF_THROW(ConfigError, "worker command '{}' cannot be run: {}{}", exe, std::strerror(exec_errno),
             exec_errno == ENOEXEC ? " (a script needs a '#!' first line naming its interpreter)" : "");
  }
  // Also from the parent, so signalling the group never races the child's setpgid.
  ::setpgid(pid, pid);
  SpawnedProcess p;
  p.pid = pid;
  p.stdout_fd = out[0];
  p.stderr_fd = err[0];
  p.heartbeat_fd = hb[0];
  set_nonblocking_cloexec(p.stdout_fd);
  set_nonblocking_cloexec(p.stderr_fd);
  set_nonblocking_cloexec(p.heartbeat_fd);
  return p;
}

}  // namespace lf::agent
