#include "model_test_util.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>

#include "lf/common/remove_tree.h"
#include "lf/model/tensor_io.h"

namespace lf::model::test {
namespace fs = std::filesystem;

fs::path fixture(const std::string& name) { return fs::path(LF_MODEL_FIXTURES) / name; }

std::map<std::string, at::Tensor> load_ref(const std::string& name) { return load_tensor_file(fixture(name)); }

double max_abs_diff(const at::Tensor& a, const at::Tensor& ref) {
  return (a.detach().to(at::kDouble) - ref.to(at::kDouble)).abs().max().item<double>();
}

double rel_err(const at::Tensor& a, const at::Tensor& ref) {
  const double scale = ref.to(at::kDouble).abs().max().item<double>();
  return max_abs_diff(a, ref) / std::max(scale, 1e-30);
}

using lf::remove_tree;  // not std::filesystem::remove_all: see lf/common/remove_tree.h

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  path_ = fs::temp_directory_path() / ("lf_model_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  remove_tree(path_);
  fs::create_directories(path_);
}

TempDir::~TempDir() { remove_tree(path_); }

namespace {

// One interpreter per script for the whole binary (the script's --serve mode): each call writes its
// arguments as a line and reads the output up to the sentinel line with the exit code. A python, torch,
// transformers and peft started for each of the eight checks was ~6 s of CPU each, most of model_test.
class PythonServer {
 public:
  PythonServer(const std::string& python, const std::string& script) {
    std::signal(SIGPIPE, SIG_IGN);  // a server that died is a failed call, not a killed test
    int to[2], from[2];
    if (::pipe2(to, O_CLOEXEC) != 0 || ::pipe2(from, O_CLOEXEC) != 0) return;  // dup2 keeps 0-2 open
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(to[0], 0);
      ::dup2(from[1], 1);
      ::dup2(from[1], 2);
      ::execl(python.c_str(), python.c_str(), script.c_str(), "--serve", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(to[0]);
    ::close(from[1]);
    in_ = ::fdopen(to[1], "w");
    out_ = ::fdopen(from[0], "r");
  }
  ~PythonServer() {
    if (in_) std::fclose(in_);  // end of input: the server returns
    if (out_) std::fclose(out_);
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
  }
  PythonServer(const PythonServer&) = delete;
  PythonServer& operator=(const PythonServer&) = delete;

  // The call's exit code, or -3 when the server ended without one (its output is in *output).
  int call(const std::string& args, std::string* output) {
    if (!in_ || !out_ || std::fprintf(in_, "%s\n", args.c_str()) < 0 || std::fflush(in_) != 0) return -2;
    static const std::string sentinel = "\x1e--serve exit ";
    std::array<char, 4096> buf{};
    std::string line;
    while (std::fgets(buf.data(), buf.size(), out_)) {
      line += buf.data();
      if (line.back() != '\n') continue;
      if (line.rfind(sentinel, 0) == 0) return std::stoi(line.substr(sentinel.size()));
      output->append(line);
      line.clear();
    }
    output->append(line);
    return -3;
  }

 private:
  pid_t pid_ = -1;
  FILE* in_ = nullptr;
  FILE* out_ = nullptr;
};

}  // namespace

int run_python(const std::string& script, const std::string& args, std::string* output) {
  const std::string python = LF_PYTHON_EXE;
  if (python.empty()) return -1;
  static std::map<std::string, std::unique_ptr<PythonServer>> servers;
  auto& server = servers[script];
  if (!server) server = std::make_unique<PythonServer>(python, std::string(LF_SOURCE_DIR) + "/scripts/fixtures/" + script);
  return server->call(args, output);
}

}  // namespace lf::model::test
