#pragma once
// A read-only view of a small safetensors fixture (F32 and BF16 tensors and the
// __metadata__ map) for the offload tests; the model's reader is libtorch-side.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace lf::offload::test {

class SafetensorsFixture {
 public:
  explicit SafetensorsFixture(const std::string& path);  // throws std::runtime_error
  std::vector<float> f32(const std::string& name) const;
  std::vector<uint16_t> bf16(const std::string& name) const;  // the raw bits
  const nlohmann::json& metadata() const { return metadata_; }

 private:
  std::string bytes_of(const std::string& name, const char* dtype, size_t elem_size) const;

  nlohmann::json header_;
  nlohmann::json metadata_;
  std::string data_;
};

}  // namespace lf::offload::test
