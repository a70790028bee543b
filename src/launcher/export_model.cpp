#include "export_model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string_view>
#include <nlohmann/json.hpp>

#include "lf/common/error.h"
#include "export_oft.h"
#include "lf/model/oft_shape.h"
#include "lf/model/safetensors.h"

namespace lf {

namespace fs = std::filesystem;
using model::StDtype;

namespace {

constexpr const char* kPeftPrefix = "base_model.model.";
const char* const kTokenizerFiles[] = {"tokenizer.json",     "tokenizer_config.json", "special_tokens_map.json",
                                       "added_tokens.json",  "vocab.json",            "merges.txt",
                                       "tokenizer.model",    "chat_template.jinja",   "chat_template.json"};

float bf16_to_float(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t float_to_bf16(float f) {  // round to nearest even, as torch's .to(bfloat16)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// [n] of any float dtype -> fp32 (data may be misaligned: copied element by element).
std::vector<float> to_float(const model::StTensorInfo& t, const uint8_t* data, const std::string& where) {
  const auto n = static_cast<size_t>(t.numel());
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    switch (t.dtype) {
      case StDtype::kF32: std::memcpy(&out[i], data + 4 * i, 4); break;
      case StDtype::kBF16: {
        uint16_t h;
        std::memcpy(&h, data + 2 * i, 2);
        out[i] = bf16_to_float(h);
        break;
      }
      case StDtype::kF16: {
        _Float16 h;
        std::memcpy(&h, data + 2 * i, 2);
        out[i] = static_cast<float>(h);
        break;
      }
      default:
        LF_THROW(ConfigError, "{}: tensor '{}' is {}, not a float type lf-train merges", where, t.name,
                 model::st_dtype_name(t.dtype));
    }
  }
  return out;
}

StDtype dtype_named(const std::string& name) {
  return name == "bfloat16" ? StDtype::kBF16 : name == "float16" ? StDtype::kF16 : StDtype::kF32;
}

void encode(const std::vector<float>& v, StDtype dtype, std::vector<uint8_t>& out) {
  out.resize(v.size() * model::st_dtype_size(dtype));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == StDtype::kF32) {
      std::memcpy(out.data() + 4 * i, &v[i], 4);
    } else if (dtype == StDtype::kBF16) {
      const uint16_t h = float_to_bf16(v[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    } else {
      const _Float16 h = static_cast<_Float16>(v[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
}

struct LoraPair {
  const model::StTensorInfo* a = nullptr;  // [r, in]
  const model::StTensorInfo* b = nullptr;  // [out, r]
  const model::StTensorInfo* m = nullptr;  // [out], DoRA's magnitude (use_dora)
  const model::StTensorInfo* oft = nullptr;  // [r, b(b-1)/2], an OFT adapter's oft_R.weight (export_oft.h)
};

struct Adapter {
  std::unique_ptr<model::SafetensorsFile> file;
  double scale = 1;
  int64_t rank = 0;
  bool dora = false;
  // OFT (peft_type OFT): peft's r / oft_block_size (one of them 0) and its Neumann terms.
  bool oft = false;
  int64_t oft_rank = 0, oft_block_size = 0, oft_terms = 5;
  std::map<std::string, LoraPair> by_base;  // base weight name -> its A and B (or OFT's oft_R)
};

// DoRA's merge (peft's merge_and_unload): each row of W + ΔW times magnitude / its L2 norm.
void dora_rescale(std::vector<float>& w, const std::vector<float>& magnitude, int64_t rows, int64_t in) {
  for (int64_t o = 0; o < rows; ++o) {
    float* wo = w.data() + o * in;
    double sq = 0;
    for (int64_t i = 0; i < in; ++i) sq += static_cast<double>(wo[i]) * wo[i];
    const float factor = magnitude[static_cast<size_t>(o)] / static_cast<float>(std::sqrt(sq));
    for (int64_t i = 0; i < in; ++i) wo[i] *= factor;
  }
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  LF_CHECK(in.good(), ConfigError, "cannot read {}", p.string());
  auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  LF_CHECK(!j.is_discarded(), ConfigError, "{} is not valid JSON", p.string());
  return j;
}

// An OFT adapter (peft_type OFT, model/oft.h): its oft_R tensors by base weight; what peft's merge computes only.
Adapter read_oft_adapter(const nlohmann::json& j, const fs::path& dir) {
  const auto cfg_path = dir / "adapter_config.json";
  for (const char* key : {"coft", "block_share", "fan_in_fan_out"})
    LF_CHECK(!j.value(key, false), ConfigError, "{}: `{}` is true; lf-train merges OFT adapters without it: merge "
             "this one with peft's merge_and_unload()", cfg_path.string(), key);
  LF_CHECK(j.value("use_cayley_neumann", true), ConfigError,
           "{}: use_cayley_neumann is false (the exact Cayley transform, a solve): lf-train merges the Neumann series "
           "only; merge this one with peft's merge_and_unload()", cfg_path.string());
  LF_CHECK(j.contains("modules_to_save") ? j["modules_to_save"].is_null() || j["modules_to_save"].empty() : true,
           ConfigError, "{}: modules_to_save is set: lf-train merges adapter layers only", cfg_path.string());
  Adapter a;
  a.oft = true;
  a.oft_rank = j.value("r", int64_t{0});
  a.oft_block_size = j.value("oft_block_size", int64_t{0});
  a.oft_terms = j.value("num_cayley_neumann_terms", int64_t{5});
  LF_CHECK((a.oft_rank == 0) != (a.oft_block_size == 0) && a.oft_rank >= 0 && a.oft_block_size >= 0, ConfigError,
           "{}: exactly one of r ({}) and oft_block_size ({}) must be non-zero (peft's OFTConfig)", cfg_path.string(),
           a.oft_rank, a.oft_block_size);
  a.file = std::make_unique<model::SafetensorsFile>(dir / "adapter_model.safetensors");
  constexpr std::string_view kPart = ".oft_R.weight";
  for (const auto& t : a.file->tensors()) {
    std::string name = t.name;
    if (name.rfind(kPeftPrefix, 0) == 0) name = name.substr(std::strlen(kPeftPrefix));
    if (name.ends_with(kPart)) a.by_base[name.substr(0, name.size() - kPart.size()) + ".weight"].oft = &t;
  }
  LF_CHECK(!a.by_base.empty(), ConfigError, "{} holds no oft_R tensors", (dir / "adapter_model.safetensors").string());
  return a;
}

Adapter read_adapter(const fs::path& dir) {
  const auto cfg_path = dir / "adapter_config.json";
  LF_CHECK(fs::exists(cfg_path), ConfigError,
           "adapter_name_or_path {} has no adapter_config.json (expected a PEFT LoRA or OFT folder: lf-train's "
           "output_dir of a `finetuning_type: lora` or `oft` run)", dir.string());
  const auto j = read_json(cfg_path);
  const auto peft_type = j.value("peft_type", std::string("LORA"));
  if (peft_type == "OFT") return read_oft_adapter(j, dir);
  LF_CHECK(peft_type == "LORA", ConfigError, "{}: peft_type {}: lf-train export merges LORA and OFT adapters",
           cfg_path.string(), peft_type);
  LF_CHECK(!j.value("fan_in_fan_out", false), ConfigError, "{}: fan_in_fan_out adapters are not merged by lf-train",
           cfg_path.string());
  LF_CHECK(j.contains("modules_to_save") ? j["modules_to_save"].is_null() || j["modules_to_save"].empty() : true,
           ConfigError, "{}: modules_to_save is set: lf-train merges LoRA layers only", cfg_path.string());
  LF_CHECK(j.contains("r") && j["r"].is_number_integer() && j["r"].get<int64_t>() > 0, ConfigError,
           "{}: `r` (the LoRA rank) is missing or not a positive integer", cfg_path.string());
  Adapter a;
  a.rank = j["r"].get<int64_t>();
  a.dora = j.value("use_dora", false);
  const double alpha = j.value("lora_alpha", static_cast<double>(a.rank));
  a.scale = j.value("use_rslora", false) ? alpha / std::sqrt(static_cast<double>(a.rank)) : alpha / a.rank;
  LF_CHECK(!j.contains("rank_pattern") || j["rank_pattern"].empty(), ConfigError,
           "{}: rank_pattern (a rank per layer) is not merged by lf-train", cfg_path.string());
  LF_CHECK(!j.contains("alpha_pattern") || j["alpha_pattern"].empty(), ConfigError,
           "{}: alpha_pattern (an alpha per layer) is not merged by lf-train", cfg_path.string());
  a.file = std::make_unique<model::SafetensorsFile>(dir / "adapter_model.safetensors");
  for (const auto& t : a.file->tensors()) {
    std::string name = t.name;
    if (name.rfind(kPeftPrefix, 0) == 0) name = name.substr(std::strlen(kPeftPrefix));
    for (const char* part : {".lora_A.weight", ".lora_B.weight"}) {
      const size_t at = name.size() >= std::strlen(part) ? name.size() - std::strlen(part) : std::string::npos;
      if (at == std::string::npos || name.compare(at, std::string::npos, part) != 0) continue;
      auto& pair = a.by_base[name.substr(0, at) + ".weight"];
      (part[6] == 'A' ? pair.a : pair.b) = &t;
    }
    constexpr std::string_view kMagnitude = ".lora_magnitude_vector";  // peft saves it without ".weight"
    if (a.dora && name.ends_with(kMagnitude))
      a.by_base[name.substr(0, name.size() - kMagnitude.size()) + ".weight"].m = &t;
  }
  LF_CHECK(!a.by_base.empty(), ConfigError, "{} holds no lora_A / lora_B tensors",
           (dir / "adapter_model.safetensors").string());
  return a;
}

// The export dtype: infer_dtype, or (auto) config.json's torch_dtype.
std::string export_dtype(const config::ExportConfig& c, const nlohmann::json& base_config) {
  if (c.infer_dtype != "auto") return c.infer_dtype;
  std::string d = base_config.value("torch_dtype", base_config.value("dtype", std::string("float32")));
  if (d == "bf16") d = "bfloat16";
  if (d == "fp16" || d == "half") d = "float16";
  if (d != "bfloat16" && d != "float16") d = "float32";
  return d;
}

void copy_side_files(const config::ExportConfig& c, const fs::path& base, const fs::path& out, const std::string& dtype,
                     nlohmann::ordered_json config_json) {
  config_json["torch_dtype"] = dtype;
  std::ofstream(out / "config.json") << config_json.dump(2) << "\n";
  if (fs::exists(base / "generation_config.json"))
    fs::copy_file(base / "generation_config.json", out / "generation_config.json",
                  fs::copy_options::overwrite_existing);
  // The adapter's tokenizer when it has one (LLaMA-Factory saves it, chat template included).
  const fs::path adapter(c.adapter_name_or_path);
  const fs::path from = !c.adapter_name_or_path.empty() && fs::exists(adapter / "tokenizer_config.json") ? adapter : base;
  int copied = 0;
  for (const char* name : kTokenizerFiles)
    if (fs::exists(from / name)) {
      fs::copy_file(from / name, out / name, fs::copy_options::overwrite_existing);
      ++copied;
    }
  if (copied == 0) spdlog::warn("export: {} has no tokenizer files: {} cannot be served without one", from.string(),
                                out.string());
}

// A previous export's weights would otherwise sit beside ours (stale shards, an old index).
void remove_old_weights(const fs::path& out) {
  if (!fs::is_directory(out)) return;
  for (const auto& e : fs::directory_iterator(out)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("model", 0) == 0 && (n.ends_with(".safetensors") || n.ends_with(".safetensors.index.json")))
      fs::remove(e.path());
  }
}

// An OFT layer's oft_R [in / b, b(b-1)/2] for its base weight [out, in] (b: peft's block size for `in`).
void check_oft_fits(const Adapter& adapter, const LoraPair& pair, const model::SafetensorsCheckpoint& weights,
                    const std::string& name, const std::string& where) {
  LF_CHECK(weights.contains(name), ConfigError,
           "{}: the adapter changes {}, which the base does not have (an adapter of another model?)", where, name);
  const auto& w = weights.info(name);
  LF_CHECK(w.shape.size() == 2, ConfigError, "{}: {} is not a matrix", where, name);
  const int64_t b = model::oft_block_size_for(adapter.oft_rank, adapter.oft_block_size, w.shape[1]);
  const std::vector<int64_t> want = {w.shape[1] / b, b * (b - 1) / 2};
  LF_CHECK(pair.oft->shape == want, ConfigError, "{}: {}.oft_R.weight is [{}], the base weight [{}] needs [{}]", where,
           name.substr(0, name.size() - 7), fmt::join(pair.oft->shape, ", "), fmt::join(w.shape, ", "),
           fmt::join(want, ", "));
}

// Every adapted layer has a base weight of the shapes B·A makes (and DoRA its magnitudes).
void check_adapter_fits(const Adapter& adapter, const model::SafetensorsCheckpoint& weights,
                        const config::ExportConfig& c, const fs::path& base) {
  const std::string where = c.adapter_name_or_path + "/adapter_model.safetensors";
  for (const auto& [name, pair] : adapter.by_base) {
    if (adapter.oft) {
      check_oft_fits(adapter, pair, weights, name, where);
      continue;
    }
    LF_CHECK(pair.a && pair.b, ConfigError, "{}: {} has lora_{} but no lora_{}", where, name, pair.a ? "A" : "B",
             pair.a ? "B" : "A");
    LF_CHECK(weights.contains(name), ConfigError,
             "{}: the adapter changes {}, which the base {} does not have (an adapter of another model?)", where,
             name, base.string());
    const auto& w = weights.info(name);
    LF_CHECK(!adapter.dora || (pair.m && pair.m->shape.size() == 1 && !w.shape.empty() && pair.m->shape[0] == w.shape[0]),
             ConfigError, "{}: use_dora is set but {} has no lora_magnitude_vector of [{}] values", where, name,
             w.shape.empty() ? 0 : w.shape[0]);
    const bool fits = w.shape.size() == 2 && pair.a->shape.size() == 2 && pair.b->shape.size() == 2 &&
                      pair.a->shape[0] == adapter.rank && pair.b->shape[1] == adapter.rank &&
                      pair.a->shape[1] == w.shape[1] && pair.b->shape[0] == w.shape[0];
    LF_CHECK(fits, ConfigError, "{}: {}: lora_A [{}] and lora_B [{}] (r {}) do not fit the base weight [{}]", where,
             name, fmt::join(pair.a->shape, ", "), fmt::join(pair.b->shape, ", "), adapter.rank,
             fmt::join(w.shape, ", "));
  }
}

// w [out, in] += scale x B·A (fp32, row by row), then DoRA's rescale: peft's merge. OFT: w R_bdᵀ (export_oft.h).
void merge_lora(std::vector<float>& w, const LoraPair& pair, const Adapter& adapter) {
  const auto& f = *adapter.file;
  const std::string where = f.path().string();
  if (pair.oft) {  // oft_R [blocks, b(b-1)/2] (check_oft_fits): in = blocks x b
    const int64_t blocks = pair.oft->shape[0], n = pair.oft->shape[1];
    const auto b = static_cast<int64_t>(std::llround((1 + std::sqrt(1.0 + 8.0 * static_cast<double>(n))) / 2));
    const int64_t in = blocks * b, rows = static_cast<int64_t>(w.size()) / in;
    merge_oft(w, rows, in, oft_neumann_rotations(to_float(*pair.oft, f.data(*pair.oft), where), blocks, b,
                                                 adapter.oft_terms), b);
    return;
  }
  const std::vector<float> a = to_float(*pair.a, f.data(*pair.a), where);  // [r, in]
  const std::vector<float> b = to_float(*pair.b, f.data(*pair.b), where);  // [out, r]
  const int64_t rank = pair.a->shape[0], in = pair.a->shape[1], rows = pair.b->shape[0];
  const float scale = static_cast<float>(adapter.scale);
  std::vector<float> row(static_cast<size_t>(in));
  for (int64_t o = 0; o < rows; ++o) {
    std::fill(row.begin(), row.end(), 0.0f);
    for (int64_t k = 0; k < rank; ++k) {
      const float bk = b[static_cast<size_t>(o * rank + k)];
      const float* ak = a.data() + k * in;
      for (int64_t i = 0; i < in; ++i) row[static_cast<size_t>(i)] += bk * ak[i];
    }
    float* wo = w.data() + o * in;
    for (int64_t i = 0; i < in; ++i) wo[i] += row[static_cast<size_t>(i)] * scale;
  }
  if (pair.m) dora_rescale(w, to_float(*pair.m, f.data(*pair.m), where), rows, in);
}

// The output tensors, each produced when the writer reaches it (one tensor in memory at a time):
// float weights in `dtype`, merged with the adapter where it adapts them; integer buffers as they are.
std::vector<model::StWriteTensor> export_tensors(const model::SafetensorsCheckpoint& weights, const Adapter* adapter,
                                                 StDtype dtype, const fs::path& base, ExportResult& r) {
  std::vector<model::StWriteTensor> tensors;
  auto buffer = std::make_shared<std::vector<uint8_t>>();
  for (const auto& name : weights.names()) {
    const auto& info = weights.info(name);
    const bool is_float = info.dtype == StDtype::kF32 || info.dtype == StDtype::kBF16 || info.dtype == StDtype::kF16;
    model::StWriteTensor t;
    t.name = name;
    t.shape = info.shape;
    t.dtype = is_float ? dtype : info.dtype;
    t.nbytes = static_cast<uint64_t>(info.numel()) * model::st_dtype_size(t.dtype);
    const LoraPair* pair = nullptr;
    if (adapter)
      if (auto it = adapter->by_base.find(name); it != adapter->by_base.end()) pair = &it->second, ++r.merged_layers;
    if (!is_float) {
      t.data = weights.data(name);
    } else {
      t.produce = [&weights, adapter, name, pair, dtype, buffer, base_dir = base.string()]() -> const void* {
        std::vector<float> w = to_float(weights.info(name), weights.data(name), base_dir);
        if (pair) merge_lora(w, *pair, *adapter);
        encode(w, dtype, *buffer);
        return buffer->data();
      };
    }
    tensors.push_back(std::move(t));
  }
  return tensors;
}

}  // namespace

ExportResult export_model(const config::ExportConfig& c) {
  const fs::path base(c.model_name_or_path), out(c.export_dir);
  LF_CHECK(fs::exists(base / "config.json"), ConfigError, "model_name_or_path {} has no config.json", base.string());
  LF_CHECK(model::SafetensorsCheckpoint::exists_in(base), ConfigError,
           "model_name_or_path {} has no model.safetensors (or index): export needs the base weights", base.string());
  LF_CHECK(fs::weakly_canonical(base) != fs::weakly_canonical(out) &&
               (c.adapter_name_or_path.empty() ||
                fs::weakly_canonical(fs::path(c.adapter_name_or_path)) != fs::weakly_canonical(out)),
           ConfigError, "export_dir {} is the base or the adapter folder: choose a new folder", out.string());
  const model::SafetensorsCheckpoint weights(base);
  std::unique_ptr<Adapter> adapter;
  if (!c.adapter_name_or_path.empty()) adapter = std::make_unique<Adapter>(read_adapter(c.adapter_name_or_path));
  const auto base_config = read_json(base / "config.json");
  LF_CHECK(!adapter || !base_config.contains("quantization_config"), ConfigError,
           "model_name_or_path {} is a quantized model ({}): cannot merge adapters to a quantized model (LLaMA-Factory's "
           "rule); give the unquantized base (bf16 / fp16) the 4-bit one was made from: a QLoRA adapter merges into it",
           base.string(), base_config["quantization_config"].value("quant_method", std::string("?")));
  ExportResult r;
  r.dtype = export_dtype(c, base_config);
  if (adapter) check_adapter_fits(*adapter, weights, c, base);
  fs::create_directories(out);
  remove_old_weights(out);
  const auto tensors = export_tensors(weights, adapter.get(), dtype_named(r.dtype), base, r);
  const auto max_shard = static_cast<uint64_t>(std::llround(c.export_size_gb * 1e9));
  r.weight_files = model::write_safetensors_checkpoint(out, tensors, std::max<uint64_t>(max_shard, 1));
  nlohmann::ordered_json cfg;
  {
    std::ifstream in(base / "config.json");
    cfg = nlohmann::ordered_json::parse(in);
  }
  copy_side_files(c, base, out, r.dtype, std::move(cfg));
  return r;
}

}  // namespace lf
