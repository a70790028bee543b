#pragma once
// `lf-train CONFIG --hostfile FILE` and `lf-train launch --hostfile FILE -- CMD`: one command
// starts the agent of every host of a DeepSpeed hostfile over the system `ssh` (BatchMode:
// a key or an agent, never a password prompt), as DeepSpeed's pdsh/ssh runner does. Each host
// runs this lf-train (same path, same working directory: a shared filesystem, as for the
// outputs) with NNODES, NODE_RANK (its line), MASTER_ADDR (the first host), NPROC_PER_NODE
// (slots) and the forwarded NCCL_*, LF_*, CUDA_VISIBLE_DEVICES and --env variables. Every
// host's output is streamed here with a "[host] " prefix. Ctrl-C, SIGTERM or the failure of
// one host stops every remote agent: each remote agent's stdin is held by its ssh, and a
// remote watcher sends it SIGTERM when that stdin closes (ssh gone, link lost, or closed
// here), so no remote agent outlives this command. The job token (LF_JOB_TOKEN, LF_JOB_TOKEN_FILE,
// else one made for the run) reaches every host on ssh's stdin, so only the nodes started here
// can join. Single-threaded; owns its ssh children.
#include <string>
#include <vector>

#include "hostfile.h"

namespace lf {

struct SshFanoutOptions {
  std::vector<HostEntry> hosts;
  std::vector<std::string> args;  // lf-train's arguments for every host (no --hostfile / --env)
  std::vector<std::string> env;   // --env: NAME (this process's value) or NAME=VALUE
  double stop_grace_s = 5;        // the agents' SIGTERM-to-SIGKILL grace; ssh is killed after it
  // Every host's LF_JOB_TOKEN, sent as the first line of ssh's stdin (never on a command line).
  std::string token;
};

// Returns the first failing host's exit code (an ssh that cannot connect: 11), 128 + signal
// when interrupted, else 0.
int run_over_ssh(const SshFanoutOptions& options);

// The environment every host gets (NAME=VALUE), node rank and NNODES included.
std::vector<std::string> remote_environment(const SshFanoutOptions& options, size_t host_index);

// The command line ssh runs on a host (one string for the remote shell).
std::string remote_command(const SshFanoutOptions& options, size_t host_index, const std::string& exe,
                           const std::string& cwd);

// args without --hostfile/--env and their values (both `--flag V` and `--flag=V`).
std::vector<std::string> without_fanout_flags(const std::vector<std::string>& args);

}  // namespace lf
