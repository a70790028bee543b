#include "lf/model/moe_block.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <tuple>

#include "lf/model/grad_sink.h"
#include "lf/model/moe_experts.h"

namespace lf::model {

at::Tensor MoeBlock::forward(const at::Tensor& x, bool training) const {
  const int64_t c = x.size(-1);
  const auto dtype = x.scalar_type();
  const auto flat = x.reshape({-1, c});  // [N, C]
  at::Tensor top, chosen;
  {
    RECORD_USER_SCOPE("lf::moe_router");  // LF_PROFILE_TRACE's span (moe_trace_split.py)
    const auto logits = at::linear(flat, cast_for_compute(gate_, dtype));  // [N, E]
    auto probs = at::softmax(logits, -1, at::kFloat);
    if (aux_) probs = aux_->attach(spec.index, probs);
    std::tie(top, chosen) = at::topk(probs, spec.top_k, -1);  // [N, k]
    if (aux_) aux_->record(spec.index, chosen, probs);
    if (spec.norm_topk_prob) top = top / top.sum(-1, /*keepdim=*/true);
  }
  const auto gate_up = cast_for_compute(gate_up_, dtype), down = cast_for_compute(down_, dtype);
  at::Tensor out;
  if (dispatch_) {
    out = dispatch_->routed(flat, chosen, top.to(dtype), gate_up, down, spec.experts);
  } else {
    ExpertRouting routing;
    {
      RECORD_USER_SCOPE("lf::moe_router");
      routing = route_tokens(chosen, spec.experts, grouped_experts_for(flat));
    }
    out = routed_experts(flat, gate_up, down, top.to(dtype), routing);
  }
  if (shared_expert_) {
    auto shared = shared_expert_->forward(flat, training);
    if (shared_expert_gate_) shared = at::sigmoid(shared_expert_gate_->forward(flat, training)) * shared;
    out = out + shared;
  }
  return out.view(x.sizes());
}

void MoeBlock::named_parameters(const std::string& prefix, std::vector<NamedParam>& out) {
  out.push_back({prefix + "gate.weight", &gate_});
  out.push_back({prefix + "experts.gate_up_proj", &gate_up_});
  out.push_back({prefix + "experts.down_proj", &down_});
  if (shared_expert_) shared_expert_->named_parameters(prefix + "shared_expert.", out);
  if (shared_expert_gate_) shared_expert_gate_->named_parameters(prefix + "shared_expert_gate.", out);
}

std::vector<std::pair<std::string, Linear*>> MoeBlock::linears() {
  std::vector<std::pair<std::string, Linear*>> out;
  if (shared_expert_)
    for (auto& [name, lin] : shared_expert_->linears()) out.push_back({"shared_expert." + name, lin});
  if (shared_expert_gate_) out.push_back({"shared_expert_gate", shared_expert_gate_.get()});
  return out;
}

bool MoeBlock::draws_random(bool training) const {
  return (shared_expert_ && shared_expert_->draws_random(training)) ||
         (shared_expert_gate_ && shared_expert_gate_->draws_random(training));
}

}  // namespace lf::model
