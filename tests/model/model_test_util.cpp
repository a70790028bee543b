#include "model_test_util.h"

#include <ATen/ATen.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>

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

int run_python(const std::string& script, const std::string& args, std::string* output) {
  const std::string python = LF_PYTHON_EXE;
  if (python.empty()) return -1;
  const std::string cmd = "'" + python + "' " + LF_SOURCE_DIR + "/scripts/fixtures/" + script + " " + args + " 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return -2;
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), buf.size(), pipe)) output->append(buf.data());
  const int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -3;
}

}  // namespace lf::model::test
