#include "lf/model/value_head.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GradMode.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lf/model/causal_lm.h"
#include "lf/model/grad_sink.h"
#include "lf/model/tensor_io.h"

namespace lf::model {

ValueHead::ValueHead(const CausalLM& model, at::Generator& gen, double dropout)
    : dropout_(dropout), unit_(model.head_unit()) {
  const int64_t c = model.config().hidden_size;
  c10::NoGradGuard no_grad;
  auto cpu = at::TensorOptions().dtype(at::kFloat);
  // nn.Linear.reset_parameters: kaiming_uniform_(weight, a=sqrt(5)), then bias ~ U(-1/sqrt(in), 1/sqrt(in)).
  const double a = std::sqrt(5.0);
  const double bound = std::sqrt(3.0) * (std::sqrt(2.0 / (1 + a * a)) / std::sqrt(static_cast<double>(c)));
  auto w = at::empty({1, c}, cpu);
  w.uniform_(-bound, bound, gen);
  auto b = at::empty({1}, cpu);
  const double bb = 1 / std::sqrt(static_cast<double>(c));
  b.uniform_(-bb, bb, gen);
  const auto device = model.lm_head_weight().device();
  weight_ = w.to(device).set_requires_grad(true);
  bias_ = b.to(device).set_requires_grad(true);
}

at::Tensor ValueHead::forward(const at::Tensor& normed_hidden, bool training) const {
  auto h = normed_hidden.to(at::kFloat);  // TRL upcasts to the head's dtype
  if (training && dropout_ > 0) h = at::dropout(h, dropout_, true);
  const auto w = cast_for_compute(weight_, at::kFloat), b = cast_for_compute(bias_, at::kFloat);
  return at::linear(h, w, b).squeeze(-1);  // [N,T]
}

std::vector<NamedParam> ValueHead::named_parameters() {
  return {{"v_head.summary.weight", &weight_, unit_}, {"v_head.summary.bias", &bias_, unit_}};
}

void ValueHead::save(const std::filesystem::path& file, const at::Tensor& weight, const at::Tensor& bias) const {
  save_tensor_file(file, {{"v_head.summary.bias", bias.to(at::kFloat).cpu()},
                          {"v_head.summary.weight", weight.to(at::kFloat).cpu()}});
}

double value_head_dropout(const std::filesystem::path& model_dir) {
  std::ifstream in(model_dir / "config.json");
  const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("summary_dropout_prob") && j["summary_dropout_prob"].is_number())
    return j["summary_dropout_prob"].get<double>();
  return 0.1;
}

}  // namespace lf::model
