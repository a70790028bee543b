#pragma once
// Safetensors files and checkpoint folders, read and written without torch.
//
// Format: u64 little-endian header length N, N bytes of JSON
// {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
// then the data (offsets relative to its start). Every size is checked against the
// file's length before the file is mapped, so a truncated or corrupt file is a
// ConfigError naming the file, never a SIGBUS. Data pointers may be misaligned
// (offsets need not be multiples of the element size): copy, never reinterpret.
//
// Ownership: a SafetensorsFile owns its read-only mapping; pointers it returns live
// as long as it does. Not thread-safe for concurrent construction; reads are.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace lf::model {

enum class StDtype { kF64, kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU8, kBool, kF8E4M3, kF8E5M2 };

size_t st_dtype_size(StDtype dtype);
const char* st_dtype_name(StDtype dtype);  // "BF16", ...
StDtype st_dtype_from_name(const std::string& name, const std::string& where);

struct StTensorInfo {
  std::string name;
  StDtype dtype = StDtype::kF32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // from the start of the file
  uint64_t nbytes = 0;
  int64_t numel() const;
};

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const std::vector<StTensorInfo>& tensors() const { return tensors_; }
  const StTensorInfo* find(const std::string& name) const;
  const uint8_t* data(const StTensorInfo& info) const { return base_ + info.offset; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::filesystem::path path_;
  std::vector<StTensorInfo> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
};

// A folder holding model.safetensors, or model.safetensors.index.json and its shards
// (`prefix` selects e.g. "adapter_model" instead of "model").
class SafetensorsCheckpoint {
 public:
  explicit SafetensorsCheckpoint(const std::filesystem::path& dir, const std::string& prefix = "model");
  static bool exists_in(const std::filesystem::path& dir, const std::string& prefix = "model");

  std::vector<std::string> names() const;  // sorted
  bool contains(const std::string& name) const { return where_.count(name) != 0; }
  const StTensorInfo& info(const std::string& name) const;
  const uint8_t* data(const std::string& name) const;
  size_t num_files() const { return files_.size(); }

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, std::pair<const SafetensorsFile*, const StTensorInfo*>> where_;
};

struct StWriteTensor {
  std::string name;
  StDtype dtype = StDtype::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;  // contiguous, little-endian
  uint64_t nbytes = 0;
  // When data is null: called once, just before the tensor's bytes are written, for a pointer
  // valid until the next produce call of the same writer. So a file is written one tensor in
  // memory at a time (a sharded model's weights are gathered unit by unit), the header first.
  std::function<const void*()> produce;
};

// Writes one file atomically (temp file + rename). Tensors are laid out in the given order.
void write_safetensors(const std::filesystem::path& path, const std::vector<StWriteTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

// Writes `prefix`.safetensors, or, when the tensors exceed max_shard_bytes, HF-style
// shards `prefix`-0000i-of-0000n.safetensors plus `prefix`.safetensors.index.json.
// Returns the files written (index last).
std::vector<std::filesystem::path> write_safetensors_checkpoint(
    const std::filesystem::path& dir, const std::vector<StWriteTensor>& tensors,
    uint64_t max_shard_bytes, const std::string& prefix = "model");

}  // namespace lf::model
