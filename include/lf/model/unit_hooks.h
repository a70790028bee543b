#pragma once
// The seam through which a sharding strategy (ZeRO-3) sees the model's forward and backward
// unit by unit, attached from outside like the gradient routes (grad_sink.h): the model stays
// single-device and only announces where each unit's use begins and ends.
//
// Units, in forward order: 0 the embedding, 1..L the decoder layers, L+1 the head (final
// norm, and lm_head when it is not tied to the embedding). For a unit u:
//   forward:  before_forward(u, false) -> the unit computes -> after_forward(u, false)
//   backward, the unit checkpointed (its forward saved only its input):
//             before_forward(u, true) -> recompute -> after_forward(u, true) -> inner
//             backward -> after_backward(u)
//   backward, not checkpointed: before_backward(u) when the gradient of its output arrives
//             (its saved tensors, weights among them, are about to be read), then
//             after_backward(u) once the gradient of its input is computed (the unit's
//             backward is over; its weights' gradients have been handed out).
// The embedding has no input gradient when it is frozen; after_backward(0) then does not
// come (a strategy finishes such units after backward returns).
//
// Threading: forward calls come from the training thread, backward calls from autograd's
// thread while the training thread waits in backward(). Never concurrently.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>

namespace lf::model {

class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  virtual void before_forward(int64_t unit, bool recompute) = 0;
  virtual void after_forward(int64_t unit, bool recompute) = 0;
  virtual void before_backward(int64_t unit) = 0;
  virtual void after_backward(int64_t unit) = 0;
};

// Runs fn(x) as unit `unit` with the hooks' calls around it (hooks may be null: just fn(x)).
// x's gradient, when it has one, passes through unchanged.
at::Tensor run_unit(UnitHooks* hooks, int64_t unit, const at::Tensor& x,
                    const std::function<at::Tensor(const at::Tensor&)>& fn);

}  // namespace lf::model
