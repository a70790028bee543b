#pragma once
// `lf-train CONFIG --retries N --retry-wait S`: the retry wrapper of LLaMA-Factory's
// multi-node guides (MAX_RETRY / RETRY_WAIT around `llamafactory-cli train`), built in.
// This process becomes a supervisor: each attempt is a child `lf-train` (this binary, the
// same arguments without the retry flags) whose agent runs the node; a retryable exit of
// the child starts the next attempt, resumed from the last sealed checkpoint that this
// loop's attempts wrote (retry_resume.h). The supervisor is a separate process so that a
// killed agent (SIGKILL, OOM killer) is started again by its still-living wrapper.
// Single-threaded; owns the child for its lifetime (PR_SET_PDEATHSIG ties it back).
#include <cstdint>
#include <string>
#include <vector>

#include "lf/config/train_config.h"

namespace lf {

struct RetryOptions {
  int64_t retries = 0;         // attempts after the first
  double retry_wait_s = 30;    // seconds between a failed attempt and the next
};

// Whether an attempt that ended with `code` (exit code, or 128 + signal) is run again:
// the failures of a node, the network, a deadline, NCCL, a worker or the agent killed
// (10-15, signals); never a config/data error (2), a bug (1), the user's stop (130,
// 143), a success, or a code lf-train does not define.
bool is_retryable_exit(int code);

// In words, for the attempt log: "14 (a worker on this node failed)".
std::string describe_exit(int code);

// Runs the attempts; returns the exit code of the last. `args` are this process's
// arguments after argv[0], retry flags included (they are removed for the children).
int run_with_retries(const RetryOptions& options, const config::JobPlan& config,
                     const std::vector<std::string>& args);

// args without --retries/--retry-wait (both `--flag V` and `--flag=V` forms).
std::vector<std::string> without_retry_flags(const std::vector<std::string>& args);

}  // namespace lf
