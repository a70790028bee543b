#include "safetensors_fixture.h"

#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace lf::offload::test {

SafetensorsFixture::SafetensorsFixture(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open fixture " + path);
  std::stringstream all;
  all << in.rdbuf();
  const std::string file = all.str();
  uint64_t header_len = 0;
  if (file.size() < 8) throw std::runtime_error("fixture too short: " + path);
  std::memcpy(&header_len, file.data(), 8);  // little-endian, as the host
  if (header_len > file.size() - 8) throw std::runtime_error("bad safetensors header length: " + path);
  header_ = nlohmann::json::parse(file.substr(8, header_len));
  if (header_.contains("__metadata__")) metadata_ = header_["__metadata__"];
  data_ = file.substr(8 + header_len);
}

std::string SafetensorsFixture::bytes_of(const std::string& name, const char* dtype, size_t elem_size) const {
  if (!header_.contains(name)) throw std::runtime_error("fixture has no tensor " + name);
  const auto& t = header_.at(name);
  if (t.at("dtype") != dtype) throw std::runtime_error(name + " is " + t.at("dtype").get<std::string>());
  const uint64_t begin = t.at("data_offsets")[0], end = t.at("data_offsets")[1];
  if (end < begin || end > data_.size() || (end - begin) % elem_size) throw std::runtime_error("bad offsets: " + name);
  return data_.substr(begin, end - begin);
}

std::vector<float> SafetensorsFixture::f32(const std::string& name) const {
  const std::string b = bytes_of(name, "F32", 4);
  std::vector<float> out(b.size() / 4);
  std::memcpy(out.data(), b.data(), b.size());
  return out;
}

std::vector<uint16_t> SafetensorsFixture::bf16(const std::string& name) const {
  const std::string b = bytes_of(name, "BF16", 2);
  std::vector<uint16_t> out(b.size() / 2);
  std::memcpy(out.data(), b.data(), b.size());
  return out;
}

}  // namespace lf::offload::test
