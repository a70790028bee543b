#include "lf/model/checkpointing.h"

#include "lf/model/backward_only_linear.h"
#include "lf/model/key_padding.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <optional>

namespace lf::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct LayerCheckpoint : public torch::autograd::Function<LayerCheckpoint> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const DecoderLayer* layer,
                            const RopeTables* rope, bool training) {
    // Autograd is off here (Function::apply): nothing inside the layer is saved.
    // The generator's state only when the layer draws from it: reading it is a host call a CUDA
    // graph's capture refuses, and without dropout the recompute draws nothing.
    if (layer->draws_random(training)) ctx->saved_data["rng"] = at::globalContext().defaultGenerator(x.device()).get_state();
    ctx->saved_data["layer"] = reinterpret_cast<int64_t>(layer);
    ctx->saved_data["cos"] = rope->cos;
    ctx->saved_data["sin"] = rope->sin;
    ctx->saved_data["local_cos"] = rope->local_cos;
    ctx->saved_data["local_sin"] = rope->local_sin;
    ctx->saved_data["mask"] = rope->attn_mask;
    ctx->saved_data["cu_seqlens"] = rope->varlen.cu_seqlens;
    ctx->saved_data["max_seqlen"] = rope->varlen.max_seqlen;
    ctx->saved_data["training"] = training;
    ctx->saved_data["key_lengths"] = key_padding_lengths();  // undefined outside a KeyPaddingScope
    if (!lean_recompute_enabled()) {
      ctx->save_for_backward({x});
      return layer->forward(x, *rope, training);
    }
    auto [y, mid] = layer->forward_keeping_mid(x, *rope, training);
    ctx->save_for_backward({x, mid});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    const auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const auto* layer = reinterpret_cast<const DecoderLayer*>(ctx->saved_data["layer"].toInt());
    const RopeTables rope{ctx->saved_data["cos"].toTensor(),
                          ctx->saved_data["sin"].toTensor(),
                          ctx->saved_data["mask"].toTensor(),
                          {ctx->saved_data["cu_seqlens"].toTensor(), ctx->saved_data["max_seqlen"].toInt()},
                          ctx->saved_data["local_cos"].toTensor(),
                          ctx->saved_data["local_sin"].toTensor()};
    const bool training = ctx->saved_data["training"].toBool();
    auto gen = at::globalContext().defaultGenerator(x.device());
    const bool rng = ctx->saved_data.count("rng") > 0;
    const auto now = rng ? gen.get_state() : at::Tensor();
    if (rng) gen.set_state(ctx->saved_data["rng"].toTensor());
    // The forward's key padding again: a GPU's backward runs on the autograd engine's thread, outside the scope.
    std::optional<KeyPaddingScope> pads;
    if (const auto lengths = ctx->saved_data["key_lengths"].toTensor(); lengths.defined()) pads.emplace(lengths);
    auto input = x.detach().requires_grad_(true);
    if (saved.size() == 1) {  // LF_LEAN_RECOMPUTE=0: the whole layer again
      at::Tensor y;
      {
        at::AutoGradMode enable(true);
        y = layer->forward(input, rope, training);
      }
      if (rng) gen.set_state(now);
      torch::autograd::backward({y}, {grad_out[0]});
      return {input.grad(), at::Tensor(), at::Tensor(), at::Tensor()};
    }
    // Lean: each half from its own saved input, without the projections whose outputs backward
    // never reads (DecoderLayer::mlp_half_for_backward); the MLP half's backward gives h its
    // gradient, which the attention half's then takes. Same draws in the same order as forward.
    auto mid = saved[1].detach().requires_grad_(true);
    at::Tensor h, y;
    {
      at::AutoGradMode enable(true);
      h = layer->attention_half_for_backward(input, rope, training);
      y = layer->mlp_half_for_backward(mid, training);
    }
    if (rng) gen.set_state(now);
    torch::autograd::backward({y}, {grad_out[0]});
    torch::autograd::backward({h}, {mid.grad()});
    return {input.grad(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor checkpointed_layer_forward(const DecoderLayer& layer, const at::Tensor& x, const RopeTables& rope,
                                      bool training) {
  const at::Tensor input = x.requires_grad() ? x : x.detach().requires_grad_(true);
  return LayerCheckpoint::apply(input, &layer, &rope, training);
}

}  // namespace lf::model
