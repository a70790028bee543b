#pragma once
// Shared helpers of model_test: fixture paths, reference comparison, temp dirs.
#include <ATen/core/Tensor.h>

#include <filesystem>
#include <map>
#include <string>

namespace lf::model::test {

std::filesystem::path fixture(const std::string& name);
std::map<std::string, at::Tensor> load_ref(const std::string& name);  // fixture safetensors
// max |a - ref| / max |ref| (llm.c-style relative check).
double rel_err(const at::Tensor& a, const at::Tensor& ref);
double max_abs_diff(const at::Tensor& a, const at::Tensor& ref);

// A fresh empty directory under the system temp dir, removed at destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Runs scripts/fixtures/<script> args in LF_PYTHON (one `script --serve` interpreter for every call);
// returns its exit code, or -1 when no LF_PYTHON was configured (the caller skips).
int run_python(const std::string& script, const std::string& args, std::string* output);

}  // namespace lf::model::test
