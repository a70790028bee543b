#include "lf/ckpt/optimizer_state.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "lf/common/error.h"
#include "lf/model/safetensors.h"
#include "lf/model/tensor_io.h"

namespace lf::ckpt {
namespace fs = std::filesystem;

namespace {

// "<param>.<moment>[@b-e]" -> (param, moment, b, e, whole); false for other keys.
bool parse_key(const std::string& key, int64_t whole_numel, std::string& param, std::string& moment, int64_t& b,
               int64_t& e) {
  std::string base = key;
  const auto at = key.rfind('@');
  b = 0;
  e = whole_numel;
  if (at != std::string::npos) {
    base = key.substr(0, at);
    const auto dash = key.find('-', at);
    if (dash == std::string::npos) return false;
    try {
      b = std::stoll(key.substr(at + 1, dash - at - 1));
      e = std::stoll(key.substr(dash + 1));
    } catch (const std::exception&) {
      return false;
    }
  }
  for (const char* m : {".exp_avg_sq", ".exp_avg"}) {
    const std::string suffix(m);
    if (base.size() > suffix.size() && base.compare(base.size() - suffix.size(), suffix.size(), suffix) == 0) {
      param = base.substr(0, base.size() - suffix.size());
      moment = suffix.substr(1);
      return b >= 0 && e >= b;
    }
  }
  return false;
}

}  // namespace

std::string optimizer_rank_file(int64_t rank) { return fmt::format("optimizer-rank{}.safetensors", rank); }

std::string moment_key(const std::string& param, const std::string& moment, int64_t begin, int64_t end, bool whole) {
  return whole ? fmt::format("{}.{}", param, moment) : fmt::format("{}.{}@{}-{}", param, moment, begin, end);
}

OptimizerStateReader::OptimizerStateReader(const fs::path& dir) : dir_(dir) {
  if (!fs::is_directory(dir)) return;
  std::vector<fs::path> paths;
  for (const auto& e : fs::directory_iterator(dir)) {
    const auto name = e.path().filename().string();
    if (e.is_regular_file() && name.rfind("optimizer", 0) == 0 && e.path().extension() == ".safetensors")
      paths.push_back(e.path());
  }
  std::sort(paths.begin(), paths.end());
  for (const auto& p : paths) {
    files_.push_back(std::make_unique<model::SafetensorsFile>(p));
    const auto* f = files_.back().get();
    for (const auto& info : f->tensors()) {
      std::string param, moment;
      int64_t b = 0, e = 0;
      if (!parse_key(info.name, info.numel(), param, moment, b, e)) continue;
      LF_CHECK(e - b == info.numel(), ConfigError, "{}: tensor {} holds {} elements, its name says {}", p.string(),
               info.name, info.numel(), e - b);
      pieces_[{param, moment}].push_back({f, info.name, b, e});
    }
  }
}

OptimizerStateReader::~OptimizerStateReader() = default;

void OptimizerStateReader::read(const std::string& param, const std::string& moment, int64_t begin, int64_t end,
                                at::Tensor out) const {
  LF_CHECK(out.numel() == end - begin && out.is_contiguous(), ConfigError,
           "optimizer state read of {} [{}, {}): output has {} elements", param, begin, end, out.numel());
  int64_t covered = 0;
  const auto it = pieces_.find({param, moment});
  if (it != pieces_.end()) {
    auto flat = out.view({-1});
    for (const auto& piece : it->second) {
      const int64_t b = std::max(begin, piece.begin), e = std::min(end, piece.end);
      if (b >= e) continue;
      // Only the overlap is copied out of the mapping (a resharded resume reads parts of pieces).
      auto part = *piece.file->find(piece.key);
      const uint64_t elem = model::st_dtype_size(part.dtype);
      const uint8_t* data = piece.file->data(part) + static_cast<uint64_t>(b - piece.begin) * elem;
      part.shape = {e - b};
      part.nbytes = static_cast<uint64_t>(e - b) * elem;
      flat.narrow(0, b - begin, e - b).copy_(model::read_tensor(part, data));
      covered += e - b;
    }
  }
  LF_CHECK(covered == end - begin, ConfigError,
           "resume: {} holds {} of the {} elements [{}, {}) of {}'s {} (an optimizer file of some rank is missing, or "
           "the checkpoint belongs to another model or trainable set)",
           dir_.string(), covered, end - begin, begin, end, param, moment);
}

}  // namespace lf::ckpt
