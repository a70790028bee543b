#include "lf/model/loader.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <regex>
#include <set>

#include <fmt/ranges.h>

#include "lf/common/error.h"
#include "lf/model/bnb4_checkpoint.h"
#include "lf/model/bnb4_linear.h"
#include "lf/model/tensor_io.h"

namespace lf::model {
namespace fs = std::filesystem;

const char* const kModelSideFiles[] = {
    "tokenizer.json",  "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
    "merges.txt",      "tokenizer.model",       "added_tokens.json",       "chat_template.jinja",
    "generation_config.json", nullptr};

namespace {

std::string list_some(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < 8; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > 8) s += fmt::format(", ... ({} in all)", names.size());
  return s;
}

std::string shape_str(const std::vector<int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

[[noreturn]] void throw_not_local(const std::string& p) {
  static const std::regex kHubId(R"(^[A-Za-z0-9][\w.\-]*/[\w.\-]+$)");
  if (std::regex_match(p, kHubId)) {
    const std::string local = "models/" + p.substr(p.find('/') + 1);
    LF_THROW(ConfigError,
             "model_name_or_path '{}' is not a local folder, and lf-train never downloads from a hub. "
             "Download it first: `huggingface-cli download {} --local-dir {}` (or `hf download ...`), "
             "then set model_name_or_path: {}",
             p, p, local, local);
  }
  LF_THROW(ConfigError, "model_name_or_path '{}' does not exist (expected a folder with config.json and "
                        "model.safetensors)", p);
}

}  // namespace

namespace {

// [n, piece...] for a parameter's n HF pieces (experts held fused): the view of it they fill.
std::vector<int64_t> pieces_shape(const ParamSpec& p) {
  std::vector<int64_t> shape{static_cast<int64_t>(p.hf.size())};
  shape.insert(shape.end(), p.hf[0].shape.begin(), p.hf[0].shape.end());
  return shape;
}

}  // namespace

bool reads_whole_from(const ParamSpec& p, const SafetensorsCheckpoint& ckpt) {
  if (!p.reads_whole || p.hf.size() == 1 || !ckpt.contains(p.name)) return false;
  return std::none_of(p.hf.begin(), p.hf.end(), [&](const HfTensor& t) { return ckpt.contains(t.name); });
}

void read_hf_tensors(const ParamSpec& p, const SafetensorsCheckpoint& ckpt, at::Tensor& dst) {
  const auto read = [&](const std::string& name, at::Tensor to) {
    to.copy_(read_tensor(ckpt.info(name), ckpt.data(name)).to(to.scalar_type()));
  };
  if (p.hf.size() == 1) return read(p.hf[0].name, dst);
  if (reads_whole_from(p, ckpt)) return read(p.name, dst);
  auto pieces = dst.view(pieces_shape(p));  // dst is contiguous: allocated by the model or a gather
  for (size_t k = 0; k < p.hf.size(); ++k) read(p.hf[k].name, pieces.select(0, static_cast<int64_t>(k)));
}

std::vector<LazyTensor> hf_lazy_tensors(const ParamSpec& p, c10::ScalarType dtype, std::function<at::Tensor()> fetch) {
  if (p.hf.size() == 1) return {{p.hf[0].name, p.hf[0].shape, dtype, std::move(fetch)}};
  // The first piece the writer reaches fetches the whole value, the last lets it go.
  auto value = std::make_shared<at::Tensor>();
  auto left = std::make_shared<size_t>(p.hf.size());
  std::vector<LazyTensor> out;
  for (size_t k = 0; k < p.hf.size(); ++k)
    out.push_back({p.hf[k].name, p.hf[k].shape, dtype, [value, left, fetch, k, shape = pieces_shape(p)] {
                     if (!value->defined()) *value = fetch().contiguous().view(shape);
                     auto piece = value->select(0, static_cast<int64_t>(k));
                     if (--*left == 0) value->reset();
                     return piece;
                   }});
  return out;
}

void load_weights(CausalLM& model, const SafetensorsCheckpoint& ckpt) {
  const auto& layout = model.layout();
  auto params = model.named_parameters();
  std::set<std::string> expected;
  std::vector<std::string> missing, misshaped, unexpected;
  for (const auto& p : layout.params) {
    if (reads_whole_from(p, ckpt)) {  // transformers 5's fused experts
      expected.insert(p.name);
      const auto& info = ckpt.info(p.name);
      if (info.shape != p.shape)
        misshaped.push_back(fmt::format("{} (file {}, model {})", p.name, shape_str(info.shape), shape_str(p.shape)));
      continue;
    }
    for (const auto& t : p.hf) {
      expected.insert(t.name);
      if (!ckpt.contains(t.name)) {
        missing.push_back(t.name);
        continue;
      }
      const auto& info = ckpt.info(t.name);
      if (info.shape != t.shape)
        misshaped.push_back(fmt::format("{} (file {}, model {})", t.name, shape_str(info.shape), shape_str(t.shape)));
    }
  }
  const auto& ignored = layout.hf_ignored;
  for (const auto& n : ckpt.names()) {
    if (expected.count(n) || std::find(ignored.begin(), ignored.end(), n) != ignored.end()) continue;
    if (n.find("rotary_emb.inv_freq") != std::string::npos) continue;  // old checkpoints store it
    unexpected.push_back(n);
  }
  LF_CHECK(missing.empty(), ConfigError, "checkpoint lacks {} tensor(s) the {} config needs: {}", missing.size(),
           model.config().architecture_name, list_some(missing));
  LF_CHECK(misshaped.empty(), ConfigError, "checkpoint tensor(s) of the wrong shape: {}", list_some(misshaped));
  LF_CHECK(unexpected.empty(), ConfigError, "checkpoint has {} tensor(s) the {} config does not use: {}",
           unexpected.size(), model.config().architecture_name, list_some(unexpected));
  c10::NoGradGuard no_grad;
  for (size_t k = 0; k < params.size(); ++k) read_hf_tensors(layout.params[k], ckpt, *params[k].tensor);
}

std::unique_ptr<CausalLM> load_causal_lm(const std::string& path, const LoadOptions& o) {
  const fs::path p(path);
  if (!fs::exists(p)) throw_not_local(path);
  fs::path config_path = p;
  fs::path dir = p;
  if (fs::is_directory(p)) {
    config_path = p / "config.json";
    LF_CHECK(fs::exists(config_path), ConfigError, "model folder {} has no config.json", path);
  } else {
    dir = p.parent_path();
    LF_CHECK(o.random_init, ConfigError,
             "model_name_or_path {} is a file; give the model folder (or set init_weights: random to start "
             "from random weights with this config)",
             path);
  }
  auto config = load_model_config(config_path);
  const auto saved_4bit = o.random_init ? std::nullopt : saved_bnb4_spec(config_path);
  const bool quantized = o.quantize || saved_4bit;
  // The fused expert tensors [E, 2I, C] / [E, C, I] have no 4-bit format (bitsandbytes quantizes each
  // expert's own Linear in transformers' per-expert layout): QLoRA would leave most of the weights dense.
  LF_CHECK(!quantized || config.moe.num_experts == 0, ConfigError,
           "{}: a 4-bit base (quantization_bit: 4 or a saved bitsandbytes model) is not implemented for "
           "mixture-of-experts families ({}: {} experts in fused tensors, which lf-train does not store in 4 bits); "
           "train it with LoRA on the bf16 base (remove quantization_bit), or quantize a dense family",
           path, config.architecture_name, config.moe.num_experts);
  // Quantized: built and read on the host, each linear then stored in 4 bits on the device (the dense
  // model need not fit there). Random weights are drawn on the device: 7B drawn on the host took 200 s
  // on the H200's host, and there is no file to stream layer by layer.
  const bool on_host = quantized && !o.random_init;
  auto options = at::TensorOptions().dtype(o.param_dtype).device(on_host ? at::Device(at::kCPU) : o.device);
  auto model = std::make_unique<CausalLM>(std::move(config), options);
  if (o.random_init) {
    model->init_random(o.seed);
  } else {
    LF_CHECK(SafetensorsCheckpoint::exists_in(dir), ConfigError,
             "model folder {} holds no model.safetensors or model.safetensors.index.json (only safetensors "
             "weights are read; set init_weights: random for random weights)",
             path);
    SafetensorsCheckpoint ckpt(dir);
    if (saved_4bit) load_bnb4_weights(*model, ckpt, o.device);
    else load_weights(*model, ckpt);
  }
  if (!quantized) return model;
  if (o.quantize) quantize_linears(*model, *o.quantize, o.device);
  model->to(o.device);
  return model;
}

void save_causal_lm(CausalLM& model, const fs::path& dir, const SaveOptions& o) {
  const auto params = model.named_parameters();
  if (!o.write_files) {
    for (const auto& p : params) (void)o.value_of(p);
    return;
  }
  fs::create_directories(dir);
  const auto dtype = o.dtype.value_or(params.front().tensor->scalar_type());
  std::vector<LazyTensor> tensors;
  for (size_t k = 0; k < params.size(); ++k)
    for (auto& t : hf_lazy_tensors(model.layout().params[k], dtype,
                                   [&o, p = params[k]] { return o.value_of ? o.value_of(p) : *p.tensor; }))
      tensors.push_back(std::move(t));
  save_lazy_tensors(dir, tensors, o.max_shard_bytes, "model");
  std::ofstream(dir / "config.json") << model_config_json_for_save(model.config(), scalar_type_name(dtype));
  if (!o.copy_files_from.empty() && fs::is_directory(o.copy_files_from) &&
      fs::weakly_canonical(o.copy_files_from) != fs::weakly_canonical(dir)) {
    for (const char* const* f = kModelSideFiles; *f; ++f)
      if (fs::exists(o.copy_files_from / *f))
        fs::copy_file(o.copy_files_from / *f, dir / *f, fs::copy_options::overwrite_existing);
  }
}

}  // namespace lf::model
