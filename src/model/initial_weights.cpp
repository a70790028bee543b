#include "lf/model/initial_weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <vector>

#include "lf/common/error.h"
#include "lf/model/safetensors.h"

namespace lf::model {
namespace fs = std::filesystem;

namespace {

struct FolderWeights {
  std::vector<std::string> safetensors;  // file names, the index included
  uint64_t bytes = 0;
  std::vector<std::string> other;        // weights lf-train cannot read (*.bin, *.pt, ...)
  std::vector<std::string> incomplete;   // huggingface-cli's unfinished downloads
};

FolderWeights scan(const fs::path& dir) {
  FolderWeights w;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file()) continue;
    const std::string name = e.path().filename().string();
    const std::string ext = e.path().extension().string();
    if (ext == ".safetensors" || name.ends_with(".safetensors.index.json")) {
      w.safetensors.push_back(name);
      w.bytes += e.file_size();
    } else if (ext == ".bin" || ext == ".pt" || ext == ".pth" || ext == ".gguf" || ext == ".ckpt") {
      w.other.push_back(name);
    }
  }
  const fs::path downloads = dir / ".cache" / "huggingface" / "download";
  for (const auto& e : fs::recursive_directory_iterator(downloads, ec))
    if (e.path().extension() == ".incomplete") w.incomplete.push_back(e.path().filename().string());
  std::sort(w.safetensors.begin(), w.safetensors.end());
  std::sort(w.other.begin(), w.other.end());
  return w;
}

std::string size_text(uint64_t bytes) {
  return bytes >= (1ull << 30) ? fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1ull << 30))
                               : fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1ull << 20));
}

}  // namespace

InitialWeights choose_initial_weights(const fs::path& model_path, const std::string& init_weights, int64_t seed) {
  LF_CHECK(init_weights == "auto" || init_weights == "pretrained" || init_weights == "random", ConfigError,
           "init_weights: '{}' is not one of auto, pretrained, random", init_weights);
  InitialWeights out;
  const bool is_dir = fs::is_directory(model_path);
  const fs::path dir = is_dir ? model_path : model_path.parent_path();
  if (!is_dir) {
    LF_CHECK(init_weights == "random", ConfigError,
             "model_name_or_path {} is a file; give the model folder (or set init_weights: random to start from "
             "random weights with this config)",
             model_path.string());
    out.random = true;
    return out;
  }
  const FolderWeights w = scan(dir);
  if (init_weights == "random") {
    out.random = true;
    if (!w.safetensors.empty())
      out.note = fmt::format("init_weights: random: the weights in {} ({}, {}) are ignored; the model starts from "
                             "random weights (HF's init, seed {}). Drop init_weights to fine-tune them",
                             dir.string(), fmt::join(w.safetensors, ", "), size_text(w.bytes), seed);
    return out;
  }
  LF_CHECK(w.incomplete.empty(), ConfigError,
           "model folder {} is still being downloaded or its download broke off: {} unfinished file(s) under "
           ".cache/huggingface/download ({}); finish it (run huggingface-cli download again) before training",
           dir.string(), w.incomplete.size(), fmt::join(w.incomplete, ", "));
  if (w.safetensors.empty()) {
    LF_CHECK(w.other.empty(), ConfigError,
             "model folder {} holds weights lf-train cannot read ({}): only safetensors are read; convert them "
             "(transformers: model.save_pretrained(dir, safe_serialization=True)) or download the safetensors",
             dir.string(), fmt::join(w.other, ", "));
    LF_CHECK(init_weights == "auto", ConfigError,
             "init_weights: pretrained, but model folder {} holds no model.safetensors or "
             "model.safetensors.index.json: download the weights, or drop init_weights to start a model with no "
             "weights from random ones",
             dir.string());
    out.random = true;
    out.note = fmt::format("model folder {} holds no weights (config.json only): the model starts from random "
                           "weights (HF's init, seed {}). To fine-tune a model, put its *.safetensors there "
                           "(init_weights: pretrained makes a folder without weights an error)",
                           dir.string(), seed);
    return out;
  }
  // Headers, sizes and the index's shards, as the loader will read them: a truncated or
  // half-copied file fails now, not after the rendezvous.
  SafetensorsCheckpoint check(dir);
  return out;
}

}  // namespace lf::model
