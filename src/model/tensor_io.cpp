#include "lf/model/tensor_io.h"

#include <ATen/ATen.h>

#include <cstring>

#include "lf/common/error.h"

namespace lf::model {

c10::ScalarType to_scalar_type(StDtype d) {
  switch (d) {
    case StDtype::kF64: return at::kDouble;
    case StDtype::kF32: return at::kFloat;
    case StDtype::kF16: return at::kHalf;
    case StDtype::kBF16: return at::kBFloat16;
    case StDtype::kI64: return at::kLong;
    case StDtype::kI32: return at::kInt;
    case StDtype::kI16: return at::kShort;
    case StDtype::kI8: return at::kChar;
    case StDtype::kU8: return at::kByte;
    case StDtype::kBool: return at::kBool;
    case StDtype::kF8E4M3: return at::kFloat8_e4m3fn;
    case StDtype::kF8E5M2: return at::kFloat8_e5m2;
  }
  LF_THROW(ConfigError, "unmapped safetensors dtype");
}

StDtype to_st_dtype(c10::ScalarType t) {
  for (StDtype d : {StDtype::kF64, StDtype::kF32, StDtype::kF16, StDtype::kBF16, StDtype::kI64, StDtype::kI32,
                    StDtype::kI16, StDtype::kI8, StDtype::kU8, StDtype::kBool, StDtype::kF8E4M3, StDtype::kF8E5M2})
    if (to_scalar_type(d) == t) return d;
  LF_THROW(ConfigError, "dtype {} cannot be stored in safetensors", c10::toString(t));
}

c10::ScalarType scalar_type_from_name(const std::string& n) {
  if (n == "bfloat16" || n == "bf16") return at::kBFloat16;
  if (n == "float16" || n == "fp16" || n == "half") return at::kHalf;
  if (n == "float32" || n == "fp32" || n == "float") return at::kFloat;
  LF_THROW(ConfigError, "unknown dtype '{}' (expected bfloat16, float16 or float32)", n);
}

std::string scalar_type_name(c10::ScalarType t) {
  switch (t) {
    case at::kBFloat16: return "bfloat16";
    case at::kHalf: return "float16";
    case at::kFloat: return "float32";
    default: return c10::toString(t);
  }
}

at::Tensor read_tensor(const StTensorInfo& info, const uint8_t* data) {
  auto t = at::empty(info.shape, at::TensorOptions().dtype(to_scalar_type(info.dtype)));
  if (info.nbytes) std::memcpy(t.data_ptr(), data, info.nbytes);
  return t;
}

namespace {

// Each tensor is fetched, moved to the CPU and converted only when the writer reaches it, so
// a checkpoint of a large model never holds a second copy of it in host memory.
std::vector<StWriteTensor> lazy_views(const std::vector<LazyTensor>& tensors) {
  std::vector<StWriteTensor> out;
  auto holder = std::make_shared<at::Tensor>();  // the tensor being written
  for (const auto& t : tensors) {
    StWriteTensor w{t.name, to_st_dtype(t.dtype), t.shape, nullptr,
                    static_cast<uint64_t>(c10::multiply_integers(t.shape)) * at::elementSize(t.dtype), {}};
    w.produce = [holder, fetch = t.fetch, type = t.dtype, name = t.name, nbytes = w.nbytes] {
      *holder = fetch().detach().to(at::kCPU).to(type).contiguous();
      LF_CHECK(holder->nbytes() == nbytes, ConfigError, "saving {}: {} bytes fetched, {} expected", name,
               holder->nbytes(), nbytes);
      return holder->data_ptr();
    };
    out.push_back(std::move(w));
  }
  return out;
}

std::vector<LazyTensor> lazy(const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                             std::optional<c10::ScalarType> dtype) {
  std::vector<LazyTensor> out;
  for (const auto& [name, t] : tensors)
    out.push_back({name, t.sizes().vec(), dtype.value_or(t.scalar_type()), [t = t] { return t; }});
  return out;
}

}  // namespace

void save_tensors(const std::filesystem::path& dir, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                  uint64_t max_shard_bytes, const std::string& prefix, std::optional<c10::ScalarType> dtype) {
  save_lazy_tensors(dir, lazy(tensors, dtype), max_shard_bytes, prefix);
}

void save_lazy_tensors(const std::filesystem::path& dir, const std::vector<LazyTensor>& tensors,
                       uint64_t max_shard_bytes, const std::string& prefix) {
  write_safetensors_checkpoint(dir, lazy_views(tensors), max_shard_bytes, prefix);
}

void save_tensor_file(const std::filesystem::path& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  write_safetensors(path, lazy_views(lazy(tensors, std::nullopt)));
}

void save_lazy_tensor_file(const std::filesystem::path& path, const std::vector<LazyTensor>& tensors) {
  write_safetensors(path, lazy_views(tensors));
}

std::map<std::string, at::Tensor> load_tensor_file(const std::filesystem::path& path) {
  SafetensorsFile f(path);
  std::map<std::string, at::Tensor> out;
  for (const auto& info : f.tensors()) out[info.name] = read_tensor(info, f.data(info));
  return out;
}

}  // namespace lf::model
