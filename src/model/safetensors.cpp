// Safetensors reading (validate, then mmap) and writing (temp file + rename).
#include "lf/model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lf/common/error.h"

namespace lf::model {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the Rust reference refuses > 100 MB too

struct DtypeRow {
  StDtype dtype;
  const char* name;
  size_t size;
};
constexpr DtypeRow kDtypes[] = {
    {StDtype::kF64, "F64", 8}, {StDtype::kF32, "F32", 4},   {StDtype::kF16, "F16", 2},
    {StDtype::kBF16, "BF16", 2}, {StDtype::kI64, "I64", 8}, {StDtype::kI32, "I32", 4},
    {StDtype::kI16, "I16", 2}, {StDtype::kI8, "I8", 1},     {StDtype::kU8, "U8", 1},
    {StDtype::kBool, "BOOL", 1}, {StDtype::kF8E4M3, "F8_E4M3", 1}, {StDtype::kF8E5M2, "F8_E5M2", 1},
};

const DtypeRow& row(StDtype d) {
  for (const auto& r : kDtypes)
    if (r.dtype == d) return r;
  LF_THROW(ConfigError, "unknown safetensors dtype {}", static_cast<int>(d));
}

}  // namespace

size_t st_dtype_size(StDtype dtype) { return row(dtype).size; }
const char* st_dtype_name(StDtype dtype) { return row(dtype).name; }

StDtype st_dtype_from_name(const std::string& name, const std::string& where) {
  for (const auto& r : kDtypes)
    if (name == r.name) return r.dtype;
  LF_THROW(ConfigError, "{}: unsupported safetensors dtype '{}' (expected F32, F16, BF16, ...)", where, name);
}

int64_t StTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

SafetensorsFile::SafetensorsFile(const fs::path& path) : path_(path) {
  const std::string p = path.string();
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  LF_CHECK(fd >= 0, ConfigError, "cannot open safetensors file {}: {}", p, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    LF_THROW(ConfigError, "cannot stat {}: {}", p, std::strerror(errno));
  }
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  auto fail = [&](const std::string& why) {
    ::close(fd);
    LF_THROW(ConfigError, "corrupt or truncated safetensors file {} ({} bytes): {}", p, file_size, why);
  };
  if (file_size < 8) fail("shorter than the 8-byte header length");
  uint8_t len_bytes[8];
  if (::pread(fd, len_bytes, 8, 0) != 8) fail("cannot read the header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  if (header_len > kMaxHeaderBytes) fail(fmt::format("header length {} is implausible", header_len));
  if (header_len > file_size - 8) fail(fmt::format("header length {} runs past the end of the file", header_len));
  std::string header(header_len, '\0');
  if (header_len > 0 && ::pread(fd, header.data(), header_len, 8) != static_cast<ssize_t>(header_len))
    fail("cannot read the header");

  json j;
  try {
    j = json::parse(header);
  } catch (const std::exception& e) {
    fail(fmt::format("header is not valid JSON: {}", e.what()));
  }
  if (!j.is_object()) fail("header is not a JSON object");
  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = file_size - data_start;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (it->is_object())
        for (auto m = it->begin(); m != it->end(); ++m)
          metadata_[m.key()] = m->is_string() ? m->get<std::string>() : m->dump();
      continue;
    }
    StTensorInfo info;
    info.name = it.key();
    try {
      info.dtype = st_dtype_from_name(it->at("dtype").get<std::string>(), p);
      info.shape = it->at("shape").get<std::vector<int64_t>>();
      auto off = it->at("data_offsets").get<std::vector<uint64_t>>();
      if (off.size() != 2) fail(fmt::format("tensor '{}': data_offsets must have 2 entries", info.name));
      if (off[0] > off[1] || off[1] > data_size)
        fail(fmt::format("tensor '{}': data_offsets [{}, {}] outside the {} data bytes", info.name, off[0],
                         off[1], data_size));
      info.offset = data_start + off[0];
      info.nbytes = off[1] - off[0];
    } catch (const json::exception& e) {
      fail(fmt::format("tensor '{}': bad entry: {}", info.name, e.what()));
    }
    for (int64_t d : info.shape)
      if (d < 0) fail(fmt::format("tensor '{}': negative dimension", info.name));
    const uint64_t want = static_cast<uint64_t>(info.numel()) * st_dtype_size(info.dtype);
    if (want != info.nbytes)
      fail(fmt::format("tensor '{}': {} bytes for shape of {} bytes", info.name, info.nbytes, want));
    index_[info.name] = tensors_.size();
    tensors_.push_back(std::move(info));
  }

  size_ = file_size;
  if (size_ > 0) {
    void* m = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) fail(fmt::format("mmap failed: {}", std::strerror(errno)));
    base_ = static_cast<const uint8_t*>(m);
  }
  ::close(fd);
}

SafetensorsFile::~SafetensorsFile() {
  if (base_) ::munmap(const_cast<uint8_t*>(base_), size_);
}

const StTensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

bool SafetensorsCheckpoint::exists_in(const fs::path& dir, const std::string& prefix) {
  return fs::exists(dir / (prefix + ".safetensors")) || fs::exists(dir / (prefix + ".safetensors.index.json"));
}

SafetensorsCheckpoint::SafetensorsCheckpoint(const fs::path& dir, const std::string& prefix) {
  const fs::path single = dir / (prefix + ".safetensors");
  const fs::path index = dir / (prefix + ".safetensors.index.json");
  std::vector<fs::path> shards;
  std::map<std::string, std::string> weight_map;
  if (fs::exists(index)) {
    std::ifstream in(index);
    json j;
    try {
      j = json::parse(in);
      for (auto it = j.at("weight_map").begin(); it != j.at("weight_map").end(); ++it)
        weight_map[it.key()] = it->get<std::string>();
    } catch (const json::exception& e) {
      LF_THROW(ConfigError, "bad safetensors index {}: {}", index.string(), e.what());
    }
    std::vector<std::string> names;
    for (const auto& [_, f] : weight_map) names.push_back(f);
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    for (const auto& f : names) {
      LF_CHECK(f.find('/') == std::string::npos && f.find("..") == std::string::npos, ConfigError,
               "{}: shard name '{}' must be a plain file name", index.string(), f);
      shards.push_back(dir / f);
    }
  } else {
    LF_CHECK(fs::exists(single), ConfigError, "{} holds neither {}.safetensors nor {}.safetensors.index.json",
             dir.string(), prefix, prefix);
    shards.push_back(single);
  }
  for (const auto& s : shards) {
    files_.push_back(std::make_unique<SafetensorsFile>(s));
    const SafetensorsFile* f = files_.back().get();
    for (const auto& info : f->tensors()) {
      if (!weight_map.empty()) {
        auto w = weight_map.find(info.name);
        LF_CHECK(w != weight_map.end() && dir / w->second == s, ConfigError,
                 "tensor '{}' is in {} but the index places it elsewhere", info.name, s.string());
      }
      LF_CHECK(where_.emplace(info.name, std::make_pair(f, &info)).second, ConfigError,
               "tensor '{}' appears twice in {}", info.name, dir.string());
    }
  }
  for (const auto& [name, file] : weight_map)
    LF_CHECK(where_.count(name), ConfigError, "index lists tensor '{}' in {} but that file lacks it", name, file);
}

std::vector<std::string> SafetensorsCheckpoint::names() const {
  std::vector<std::string> out;
  for (const auto& [n, _] : where_) out.push_back(n);
  return out;
}

const StTensorInfo& SafetensorsCheckpoint::info(const std::string& name) const {
  auto it = where_.find(name);
  LF_CHECK(it != where_.end(), ConfigError, "checkpoint has no tensor '{}'", name);
  return *it->second.second;
}

const uint8_t* SafetensorsCheckpoint::data(const std::string& name) const {
  auto it = where_.find(name);
  LF_CHECK(it != where_.end(), ConfigError, "checkpoint has no tensor '{}'", name);
  return it->second.first->data(*it->second.second);
}

void write_safetensors(const fs::path& path, const std::vector<StWriteTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  // ordered_json keeps the data order and the header order the same, as the Rust writer does.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    int64_t numel = 1;
    for (int64_t d : t.shape) numel *= d;
    LF_CHECK(static_cast<uint64_t>(numel) * st_dtype_size(t.dtype) == t.nbytes, ConfigError,
             "write_safetensors {}: tensor '{}' has {} bytes for its shape", path.string(), t.name, t.nbytes);
    header[t.name] = {{"dtype", st_dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.nbytes}}};
    offset += t.nbytes;
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    LF_CHECK(out.good(), ConfigError, "cannot write {}", tmp.string());
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>((static_cast<uint64_t>(h.size()) >> (8 * i)) & 0xff);
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(h.data(), static_cast<std::streamsize>(h.size()));
    for (const auto& t : tensors) {
      const void* data = t.data ? t.data : t.produce();
      out.write(static_cast<const char*>(data), static_cast<std::streamsize>(t.nbytes));
    }
    out.flush();
    if (!out.good()) {
      // A full disk must not stay full of this half file.
      out.close();
      std::error_code ignored;
      fs::remove(tmp, ignored);
      LF_THROW(ConfigError, "write to {} failed (disk full?); the partial file is removed", tmp.string());
    }
  }
  fs::rename(tmp, path);
}

std::vector<fs::path> write_safetensors_checkpoint(const fs::path& dir, const std::vector<StWriteTensor>& tensors,
                                                   uint64_t max_shard_bytes, const std::string& prefix) {
  fs::create_directories(dir);
  std::vector<std::vector<StWriteTensor>> shards(1);
  uint64_t in_shard = 0, total = 0;
  for (const auto& t : tensors) {
    if (in_shard > 0 && in_shard + t.nbytes > max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(t);
    in_shard += t.nbytes;
    total += t.nbytes;
  }
  std::vector<fs::path> written;
  if (shards.size() == 1) {
    written.push_back(dir / (prefix + ".safetensors"));
    write_safetensors(written.back(), tensors);
    fs::remove(dir / (prefix + ".safetensors.index.json"));
    return written;
  }
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string name = fmt::format("{}-{:05d}-of-{:05d}.safetensors", prefix, i + 1, shards.size());
    written.push_back(dir / name);
    write_safetensors(written.back(), shards[i]);
    for (const auto& t : shards[i]) weight_map[t.name] = name;
  }
  nlohmann::ordered_json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  written.push_back(dir / (prefix + ".safetensors.index.json"));
  std::ofstream(written.back()) << index.dump(2) << "\n";
  fs::remove(dir / (prefix + ".safetensors"));
  return written;
}

}  // namespace lf::model
