#include "lf/common/job_token.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "lf/common/env_knobs.h"
#include "lf/common/error.h"

namespace lf {

namespace {

std::string trimmed(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
}

}  // namespace

std::string job_token_from_env() {
  const auto direct = knob_string("LF_JOB_TOKEN");
  const auto path = knob_string("LF_JOB_TOKEN_FILE");
  if (!path) return direct.value_or("");
  std::ifstream in(*path);
  LF_CHECK(in, ConfigError, "LF_JOB_TOKEN_FILE={}: cannot read it ({}); point it at a file holding the job's token "
           "(e.g. a mounted Kubernetes Secret), readable by this user", *path, std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  const std::string token = trimmed(text.str());
  LF_CHECK(!token.empty(), ConfigError, "LF_JOB_TOKEN_FILE={} is empty: it must hold the job's token (e.g. `openssl "
           "rand -hex 16 > {}`)", *path, *path);
  // Never echo either token: say only that they differ.
  LF_CHECK(!direct || *direct == token, ConfigError,
           "LF_JOB_TOKEN and LF_JOB_TOKEN_FILE={} are both set and give different tokens: set one of them", *path);
  return token;
}

std::string make_job_token() {
  std::ifstream random("/dev/urandom", std::ios::binary);
  unsigned char bytes[16] = {};
  random.read(reinterpret_cast<char*>(bytes), sizeof bytes);
  LF_CHECK(random.gcount() == sizeof bytes, ConfigError, "cannot read /dev/urandom to make a job token: set "
           "LF_JOB_TOKEN yourself");
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

}  // namespace lf
