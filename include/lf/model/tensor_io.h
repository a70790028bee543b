#pragma once
// at::Tensor <-> safetensors: dtype mapping, copying a stored tensor out (misaligned
// data is fine: it is memcpy'd), and views for the writer.
#include <ATen/core/Tensor.h>

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "lf/model/safetensors.h"

namespace lf::model {

c10::ScalarType to_scalar_type(StDtype dtype);
StDtype to_st_dtype(c10::ScalarType type);
// "bfloat16" | "float16" | "float32" -> ScalarType; ConfigError otherwise.
c10::ScalarType scalar_type_from_name(const std::string& name);
std::string scalar_type_name(c10::ScalarType type);  // HF's torch_dtype spelling

// A CPU tensor holding a copy of the stored data, in the stored dtype.
at::Tensor read_tensor(const StTensorInfo& info, const uint8_t* data);

// Saves name -> tensor (moved to CPU, made contiguous, cast to `dtype` when given)
// as one file or HF shards (see write_safetensors_checkpoint).
void save_tensors(const std::filesystem::path& dir, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                  uint64_t max_shard_bytes, const std::string& prefix = "model",
                  std::optional<c10::ScalarType> dtype = std::nullopt);
// A tensor to save whose value is fetched only when the writer reaches it (fetch: any device,
// any dtype: converted to `dtype`): files are written one tensor in memory at a time.
struct LazyTensor {
  std::string name;
  std::vector<int64_t> shape;
  c10::ScalarType dtype;
  std::function<at::Tensor()> fetch;
};
void save_lazy_tensors(const std::filesystem::path& dir, const std::vector<LazyTensor>& tensors,
                       uint64_t max_shard_bytes, const std::string& prefix = "model");
void save_lazy_tensor_file(const std::filesystem::path& path, const std::vector<LazyTensor>& tensors);
// One safetensors file of name -> tensor.
void save_tensor_file(const std::filesystem::path& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors);
// Every tensor of one file, as CPU tensors.
std::map<std::string, at::Tensor> load_tensor_file(const std::filesystem::path& path);

}  // namespace lf::model
