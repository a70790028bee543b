#pragma once
// The LM head's cross-entropy over a chunk of logits rows, forward and gradient in one kernel,
// in place (lm_head_loss.cpp's chunk loop): for each row of logits [rows, vocab] with target
// y, loss[row] = logsumexp(x) - x[y] (fp32), and the row is overwritten with
// d(sum CE)/dx = softmax(x) - onehot(y), rounded to the logits' dtype. A row whose target is
// ignore_index gets loss 0 and a zero gradient row; a target outside [0, vocab) gets loss NaN.
// Why: the ATen path upcasts the chunk to fp32 and runs five passes over it (cast,
// logsumexp, sub, exp, cast back: ~36 bytes an element); this reads the bf16 row twice and
// writes it once (6 bytes). Math in fp32 as the ATen path (exp(x - lse), then - 1 at y).
#include "lf/kernels/launch.h"

namespace lf::kernels {

struct CrossEntropyRowsArgs {
  DType dtype = DType::kBFloat16;
  int64_t rows = 0;
  int64_t vocab = 0;
  void* logits = nullptr;           // [rows, vocab], contiguous: in, then the gradient out
  const int64_t* targets = nullptr;  // [rows]
  float* loss = nullptr;             // [rows]
  int64_t ignore_index = -100;
  // [rows] or null: each row's gradient times its factor, in fp32 before the rounding (the preference
  // stages' log-probabilities: d logp / d x = -(softmax - onehot), times the row's upstream gradient).
  const float* row_scale = nullptr;
};
void cross_entropy_rows(const CrossEntropyRowsArgs& a, Stream stream);

}  // namespace lf::kernels
