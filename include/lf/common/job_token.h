#pragma once
// The job's shared secret (LF_JOB_TOKEN, or the first line of LF_JOB_TOKEN_FILE): every node
// and every worker's store client presents it to the rendezvous server; a connection with
// another one is refused and learns nothing. Where lf-train starts the nodes itself
// (--hostfile), it makes one (make_job_token) when none is given.
#include <string>

namespace lf {

// LF_JOB_TOKEN, else LF_JOB_TOKEN_FILE's content without surrounding whitespace, else "".
// ConfigError: both set to different tokens, a file that cannot be read, an empty file.
std::string job_token_from_env();

// 32 hex digits from /dev/urandom (128 bits).
std::string make_job_token();

}  // namespace lf
