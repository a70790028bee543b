#pragma once
// Starting one worker process: fork + exec with only async-signal-safe calls
// in the child. The child gets its own process group (so the agent can signal
// the worker and everything it starts), dies with the agent (PR_SET_PDEATHSIG),
// inherits no agent descriptor but its stdout/stderr pipes and the heartbeat
// socket, and starts with default signal dispositions and an empty mask.
#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace lf::agent {

struct SpawnSpec {
  std::vector<std::string> argv;             // argv[0] is looked up in PATH
  std::map<std::string, std::string> env;    // the complete environment
  int heartbeat_fd_number = 3;               // where the heartbeat socket appears in the child
};

struct SpawnedProcess {
  pid_t pid = -1;
  int stdout_fd = -1;     // read ends, non-blocking, close-on-exec
  int stderr_fd = -1;
  int heartbeat_fd = -1;  // agent end of the socketpair
};

// The live (not zombie) children of `parent`, from /proc.
std::vector<pid_t> live_children_of(pid_t parent);

// The state letter of /proc/<pid>/stat (R, S, D, T, t, Z, ...); 0 when it cannot be read.
char process_state(pid_t pid);
// "T (stopped)", "D (uninterruptible wait: I/O?)", ...
std::string describe_process_state(char state);

// Resolves a command like execvp would; ConfigError naming it when not found.
std::string resolve_executable(const std::string& command, const std::string& path_env);

// Throws ConfigError when exec fails (e.g. not executable), BackendError on fork failure.
SpawnedProcess spawn_worker(const SpawnSpec& spec);

}  // namespace lf::agent
