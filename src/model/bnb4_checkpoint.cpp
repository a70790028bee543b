// A bitsandbytes 4-bit folder read as it is (bnb4_checkpoint.h).
#include "lf/model/bnb4_checkpoint.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "lf/common/error.h"
#include "lf/model/bnb4_linear.h"
#include "lf/model/causal_lm.h"
#include "lf/model/loader.h"
#include "lf/model/tensor_io.h"

namespace lf::model {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

at::Tensor read(const SafetensorsCheckpoint& ckpt, const std::string& name) {
  LF_CHECK(ckpt.contains(name), ConfigError, "bitsandbytes 4-bit checkpoint lacks {}", name);
  return read_tensor(ckpt.info(name), ckpt.data(name));
}

// The QuantState of one linear weight `w` ("model.layers.0.self_attn.q_proj.weight") as bitsandbytes'
// QuantState.from_dict reads it; the packed codes as bytes whatever bnb_4bit_quant_storage was.
quant::Bnb4Tensor read_bnb4(const SafetensorsCheckpoint& ckpt, const std::string& w, const std::vector<int64_t>& shape,
                            const quant::Bnb4Spec& folder, at::ScalarType* dtype) {
  std::string state_name;
  for (const char* code : {"nf4", "fp4"})
    if (ckpt.contains(w + ".quant_state.bitsandbytes__" + code)) state_name = w + ".quant_state.bitsandbytes__" + code;
  LF_CHECK(!state_name.empty(), ConfigError,
           "{} is not stored in bitsandbytes' 4-bit format (no {}.quant_state.bitsandbytes__nf4 or __fp4) although "
           "config.json's quantization_config says load_in_4bit",
           w, w);
  const auto bytes = read(ckpt, state_name).contiguous();
  const auto j = json::parse(std::string(reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>()), bytes.numel()));
  quant::Bnb4Tensor q;
  q.spec = folder;
  q.spec.code = quant::code4_from_name(j.at("quant_type").get<std::string>());
  q.spec.blocksize = j.at("blocksize").get<int64_t>();
  q.shape = j.at("shape").get<std::vector<int64_t>>();
  LF_CHECK(q.shape == shape, ConfigError, "{}: bitsandbytes' quant state says shape [{}], the model's is [{}]", w,
           fmt::join(q.shape, ", "), fmt::join(shape, ", "));
  const auto dt = j.at("dtype").get<std::string>();
  *dtype = dt == "bfloat16" ? at::kBFloat16 : dt == "float16" ? at::kHalf : at::kFloat;
  q.data = read(ckpt, w).contiguous().view(at::kByte).reshape({-1}).clone();
  q.absmax = read(ckpt, w + ".absmax").reshape({-1}).clone();
  q.spec.double_quant = j.contains("nested_offset");
  if (q.spec.double_quant) {
    LF_CHECK(j.value("nested_blocksize", int64_t{256}) == quant::Bnb4Spec::kNestedBlocksize, ConfigError,
             "{}: nested blocksize {} (bitsandbytes' 4-bit matmul takes 256 only)", w, j.value("nested_blocksize", 0));
    q.nested_absmax = read(ckpt, w + ".nested_absmax").to(at::kFloat).reshape({-1}).clone();
    q.offset = at::scalar_tensor(static_cast<float>(j.at("nested_offset").get<double>()), at::kFloat);
  }
  LF_CHECK(q.data.numel() == (q.numel() + 1) / 2 && q.absmax.numel() == q.blocks(), ConfigError,
           "{}: {} bytes of codes and {} absmax values for a [{}] weight in blocks of {}", w, q.data.numel(),
           q.absmax.numel(), fmt::join(q.shape, ", "), q.spec.blocksize);
  return q;
}

}  // namespace

std::optional<quant::Bnb4Spec> saved_bnb4_spec(const fs::path& config_json) {
  std::ifstream f(config_json);
  const auto j = json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("quantization_config")) return std::nullopt;
  const auto& qc = j["quantization_config"];
  const auto method = qc.value("quant_method", std::string());
  LF_CHECK(method == "bitsandbytes", ConfigError,
           "{} is a {}-quantized model: lf-train reads bitsandbytes' 4-bit folders only (GPTQ, AWQ, AQLM, HQQ, EETQ, "
           "FP8 are other storages and GEMMs); train from the unquantized model with quantization_bit: 4",
           config_json.string(), method.empty() ? "?" : method);
  LF_CHECK(!qc.value("load_in_8bit", false), ConfigError,
           "{} holds bitsandbytes 8-bit (LLM.int8()) weights, which lf-train does not implement (another GEMM: int8 "
           "with fp16 outliers); train from the unquantized model with quantization_bit: 4",
           config_json.string());
  LF_CHECK(qc.value("load_in_4bit", false), ConfigError, "{}: quantization_config is bitsandbytes' but neither 4 nor "
                                                          "8 bits", config_json.string());
  quant::Bnb4Spec s;
  s.code = quant::code4_from_name(qc.value("bnb_4bit_quant_type", std::string("fp4")));
  s.double_quant = qc.value("bnb_4bit_use_double_quant", false);
  return s;
}

void load_bnb4_weights(CausalLM& model, const SafetensorsCheckpoint& ckpt, const c10::Device& device) {
  const auto& layout = model.layout();
  const auto params = model.named_parameters();
  const auto spec = quant::Bnb4Spec{};
  std::set<std::string> quantized;
  for (const auto& [s, lin] : model.linears()) quantized.insert(s->module + ".weight");
  c10::NoGradGuard no_grad;
  // Linear weights first, as their formats (their dense slots go), then the rest by name.
  for (auto& [s, lin] : model.linears()) {
    at::ScalarType dtype;
    auto q = read_bnb4(ckpt, s->module + ".weight", lin->weight_.sizes().vec(), spec, &dtype);
    q.data = q.data.to(device);
    q.absmax = q.absmax.to(device);
    if (q.nested()) q.nested_absmax = q.nested_absmax.to(device), q.offset = q.offset.to(device);
    lin->weight_ = at::Tensor();
    lin->format_ = make_bnb4_linear(std::move(q), dtype);
  }
  for (size_t k = 0; k < layout.params.size(); ++k) {
    if (quantized.count(layout.params[k].name)) continue;
    const auto it = std::find_if(params.begin(), params.end(),
                                 [&](const NamedParam& p) { return p.name == layout.params[k].name; });
    LF_CHECK(it != params.end(), BackendError, "parameter {} of the layout has no tensor", layout.params[k].name);
    read_hf_tensors(layout.params[k], ckpt, *it->tensor);
  }
}

}  // namespace lf::model
