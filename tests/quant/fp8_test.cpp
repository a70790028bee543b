// FP8 training's arithmetic (lf/quant/fp8.h) on the CPU, the emulation CI runs (torch's CPU _scaled_mm,
// the same call the GPU makes through cuBLASLt):
// - every cast (e4m3 / e5m2, tensorwise / axiswise, power-of-two scales, an all-zero tensor) and torchao's
//   Float8Linear forward and backward under both recipes, digest-equal to torchao's
//   (tests/fixtures/quant/fp8_digests.json, made by scripts/fixtures/fp8_reference.py);
// - each GEMM of a linear layer against the exact product of its bf16 operands, within FP8's error bound
//   element by element, with outlier channels injected into activations and weights.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "lf/common/error.h"
#include "lf/common/xxhash64.h"
#include "lf/quant/fp8.h"

namespace {

using lf::quant::Fp8Recipe;
using lf::quant::Fp8Tensor;

std::string digest(const at::Tensor& t) {
  auto c = t.contiguous().cpu();
  lf::Xxh64 h;
  h.update(c.data_ptr(), c.nbytes());
  return fmt::format("{:016x}", h.digest());
}

nlohmann::json fixture() {
  std::ifstream f(std::string(LF_FIXTURES_DIR) + "/quant/fp8_digests.json");
  return nlohmann::json::parse(f);
}

struct Inputs {
  at::Tensor x, w, g, zero;
};

// fp8_reference.py's tensors: the same draws through the same libtorch, the same outlier channels.
Inputs inputs(uint64_t seed, int64_t m, int64_t k, int64_t n, double x_outlier = 64, double w_outlier = 40) {
  at::manual_seed(seed);
  Inputs in;
  in.x = at::randn({m, k}).to(at::kBFloat16);
  in.w = (at::randn({n, k}) * 0.02).to(at::kBFloat16);
  in.g = (at::randn({m, n}) * 1e-3).to(at::kBFloat16);
  in.x.select(1, 5).mul_(x_outlier);
  in.w.select(0, 7).mul_(w_outlier);
  in.zero = at::zeros({4, 8}, at::kBFloat16);
  return in;
}

at::Tensor named(const Inputs& in, const std::string& name) {
  return name == "x" ? in.x : name == "w" ? in.w : name == "g" ? in.g : in.zero;
}

TEST(Fp8Cast, EqualsTorchaoBitForBit) {
  const auto fx = fixture();
  at::set_num_threads(1);
  const auto in = inputs(fx["seed"].get<uint64_t>(), 64, 96, 48);
  for (const auto& name : {"x", "w", "g", "zero"})
    ASSERT_EQ(digest(named(in, name)), fx["inputs"][name].get<std::string>()) << name << ": another torch's draws";
  ASSERT_EQ(fx["casts"].size(), 24u);
  for (const auto& c : fx["casts"]) {
    lf::quant::Fp8Scaling s;
    s.dtype = c["dtype"] == "float8_e5m2" ? at::ScalarType::Float8_e5m2 : at::ScalarType::Float8_e4m3fn;
    s.rowwise = c["axis"].is_number();
    s.pow2 = s.rowwise;
    s.axis = s.rowwise ? c["axis"].get<int64_t>() : -1;
    SCOPED_TRACE(c.dump());
    const auto t = lf::quant::fp8_cast(named(in, c["tensor"]), s);
    EXPECT_EQ(digest(t.data), c["data"].get<std::string>());
    EXPECT_EQ(digest(t.scale), c["scale"].get<std::string>());
  }
}

// torchao's Float8Linear (y = x W^T; after y.backward(g): x.grad, W.grad) equals the recipe's three GEMMs.
TEST(Fp8Linear, EqualsTorchaoFloat8LinearBitForBit) {
  const auto fx = fixture();
  at::set_num_threads(1);
  const auto in = inputs(fx["seed"].get<uint64_t>(), 64, 96, 48);
  ASSERT_EQ(fx["linears"].size(), 3u);
  for (const auto& c : fx["linears"]) {
    const auto r = lf::quant::fp8_recipe_from_name(c["recipe"].get<std::string>());
    SCOPED_TRACE(c["recipe"].get<std::string>());
    EXPECT_EQ(digest(lf::quant::fp8_linear_forward(in.x, in.w, r)), c["y"].get<std::string>());
    EXPECT_EQ(digest(lf::quant::fp8_linear_grad_input(in.g, in.w, r)), c["dx"].get<std::string>());
    EXPECT_EQ(digest(lf::quant::fp8_linear_grad_weight(in.g, in.x, r, at::kBFloat16)), c["dw"].get<std::string>());
  }
}

// FP8's worst case for one product a [M, K] b [K, N] from its operands' casts, element by element: each
// operand's element is off by at most u |v| + d (u: half an ulp at 3 (e4m3) or 2 (e5m2) mantissa bits; d:
// half the smallest subnormal, both over the scale), so a b is off by at most
// (u_a + u_b + u_a u_b) |a||b| + (1 + u_a) |a| d_b + (1 + u_b) d_a |b| + K d_a d_b, plus the output's bf16 rounding.
at::Tensor error_bound(const at::Tensor& a, const at::Tensor& b, const Fp8Tensor& qa, const Fp8Tensor& qb,
                       at::ScalarType ta, at::ScalarType tb, const at::Tensor& exact) {
  auto u = [](at::ScalarType t) { return t == at::ScalarType::Float8_e5m2 ? 0.125 : 0.0625; };
  auto d = [](at::ScalarType t) { return t == at::ScalarType::Float8_e5m2 ? std::ldexp(1.0, -17) : std::ldexp(1.0, -10); };
  const auto A = a.to(at::kDouble).abs(), B = b.to(at::kDouble).abs();
  const double ua = u(ta), ub = u(tb);
  const auto da = qa.scale.to(at::kDouble).reciprocal() * d(ta);  // [] or [M, 1]
  const auto db = qb.scale.to(at::kDouble).reciprocal() * d(tb);  // [] or [1, N]
  return (ua + ub + ua * ub) * at::mm(A, B) + (1 + ua) * A.sum(1, true) * db + (1 + ub) * da * B.sum(0, true) +
         static_cast<double>(a.size(1)) * da * db + exact.abs() * std::ldexp(1.0, -8) + 1e-30;
}

void expect_within(const at::Tensor& got, const at::Tensor& exact, const at::Tensor& bound, const char* what) {
  const auto excess = (got.to(at::kDouble) - exact).abs() - bound;
  EXPECT_LE(excess.max().item<double>(), 0.0) << what << ": an element beyond FP8's error bound";
  // Not vacuous: the FP8 product is not the exact one.
  EXPECT_GT((got.to(at::kDouble) - exact).abs().max().item<double>(), 0.0) << what;
}

double rel_error(const at::Tensor& got, const at::Tensor& exact) {
  return ((got.to(at::kDouble) - exact).norm() / exact.norm()).item<double>();
}

// The three GEMMs of both recipes, outlier channels in x (a column) and W (a row) at 64x and 40x.
TEST(Fp8Linear, EachGemmWithinFp8ErrorBound) {
  const auto in = inputs(7, 128, 256, 96);
  for (const auto r : {Fp8Recipe::kTensorwise, Fp8Recipe::kRowwise}) {
    SCOPED_TRACE(std::string(lf::quant::fp8_recipe_name(r)));
    const auto in_s = lf::quant::fp8_input_scaling(r, 1), g_s = lf::quant::fp8_grad_scaling(r, 1);
    const auto y_exact = at::mm(in.x.to(at::kDouble), in.w.to(at::kDouble).t());
    const auto y = lf::quant::fp8_linear_forward(in.x, in.w, r);
    expect_within(y, y_exact,
                  error_bound(in.x, in.w.t(), lf::quant::fp8_cast(in.x, in_s),
                              {lf::quant::fp8_cast(in.w, in_s).data.t(), lf::quant::fp8_cast(in.w, in_s).scale.t()},
                              in_s.dtype, in_s.dtype, y_exact),
                  "forward");
    const auto dx_exact = at::mm(in.g.to(at::kDouble), in.w.to(at::kDouble));
    const auto w0 = lf::quant::fp8_cast(in.w, lf::quant::fp8_input_scaling(r, 0));
    expect_within(lf::quant::fp8_linear_grad_input(in.g, in.w, r), dx_exact,
                  error_bound(in.g, in.w, lf::quant::fp8_cast(in.g, g_s), w0, g_s.dtype, in_s.dtype, dx_exact),
                  "input gradient");
    const auto dw_exact = at::mm(in.g.to(at::kDouble).t(), in.x.to(at::kDouble));
    const auto g0 = lf::quant::fp8_cast(in.g, lf::quant::fp8_grad_scaling(r, 0));
    const auto x0 = lf::quant::fp8_cast(in.x, lf::quant::fp8_input_scaling(r, 0));
    expect_within(lf::quant::fp8_linear_grad_weight(in.g, in.x, r, at::kBFloat16), dw_exact,
                  error_bound(in.g.t(), in.x, {g0.data.t(), g0.scale.t()}, x0, g_s.dtype, in_s.dtype, dw_exact),
                  "weight gradient");
  }
}

// rowwise_with_gw_hp: rowwise's forward bit for bit; the input gradient from g rowwise and W with one power-of-two
// scale, within FP8's bound for those casts; the weight gradient the bf16 GEMM of the unscaled operands, bit for
// bit, and (the recipe's point) nearer the exact product than rowwise's FP8 one.
TEST(Fp8Linear, RowwiseWithHighPrecisionWeightGradient) {
  const auto in = inputs(7, 128, 256, 96);
  const auto r = Fp8Recipe::kRowwiseGwHp;
  EXPECT_TRUE(lf::quant::fp8_linear_forward(in.x, in.w, r)
                  .equal(lf::quant::fp8_linear_forward(in.x, in.w, Fp8Recipe::kRowwise)));
  auto ws = lf::quant::fp8_input_scaling(r, 0);
  ws.rowwise = false;
  const auto w1 = lf::quant::fp8_cast(in.w, ws);
  ASSERT_EQ(w1.scale.dim(), 0);
  const double s = w1.scale.item<double>();
  EXPECT_EQ(s, std::exp2(std::floor(std::log2(s)))) << "the weight's one scale is a power of two";
  const auto g_s = lf::quant::fp8_grad_scaling(r, 1);
  const auto dx_exact = at::mm(in.g.to(at::kDouble), in.w.to(at::kDouble));
  const auto dx = lf::quant::fp8_linear_grad_input(in.g, in.w, r);
  expect_within(dx, dx_exact,
                error_bound(in.g, in.w, lf::quant::fp8_cast(in.g, g_s), w1, g_s.dtype, ws.dtype, dx_exact),
                "input gradient");
  EXPECT_FALSE(dx.equal(lf::quant::fp8_linear_grad_input(in.g, in.w, Fp8Recipe::kRowwise))) << "W cast per tensor";
  const auto dw = lf::quant::fp8_linear_grad_weight(in.g, in.x, r, at::kFloat);
  EXPECT_TRUE(dw.equal(at::mm(in.g.t(), in.x).to(at::kFloat))) << "dW: the bf16 GEMM, then the weight's dtype";
  const auto dw_exact = at::mm(in.g.to(at::kDouble).t(), in.x.to(at::kDouble));
  const double hp = rel_error(dw, dw_exact);
  const double f8 = rel_error(lf::quant::fp8_linear_grad_weight(in.g, in.x, Fp8Recipe::kRowwise, at::kFloat), dw_exact);
  EXPECT_LT(hp, 0.01);
  EXPECT_GT(f8, 4 * hp) << "rowwise's FP8 dW " << f8 << ", high precision " << hp;
}

// Per-tensor scaling's failure that rowwise avoids: an outlier row of W (65536x: beyond e4m3's 2^15 of normal range) sets the one scale, the
// other rows fall to e4m3's subnormals; rowwise gives each row its own scale.
TEST(Fp8Linear, RowwiseKeepsTheRowsAnOutlierStarvesUnderTensorwise) {
  const auto in = inputs(11, 64, 128, 32, /*x_outlier=*/1, /*w_outlier=*/65536);
  const auto exact = at::mm(in.x.to(at::kDouble), in.w.to(at::kDouble).t());
  auto others = [](const at::Tensor& t) { return at::cat({t.narrow(1, 0, 7), t.narrow(1, 8, t.size(1) - 8)}, 1); };
  const double tw = rel_error(others(lf::quant::fp8_linear_forward(in.x, in.w, Fp8Recipe::kTensorwise)), others(exact));
  const double rw = rel_error(others(lf::quant::fp8_linear_forward(in.x, in.w, Fp8Recipe::kRowwise)), others(exact));
  EXPECT_LT(rw, 0.05);
  EXPECT_GT(tw, 3 * rw) << "tensorwise " << tw << ", rowwise " << rw;
}

// LoRA's frozen base stored once: its forward is the per-step cast's bit for bit; its input gradient is
// too under tensorwise, and under rowwise (W's row scales folded into g) within the same accuracy.
TEST(Fp8StoredWeight, MatchesThePerStepCast) {
  const auto in = inputs(3, 96, 128, 64);
  const auto dx_exact = at::mm(in.g.to(at::kDouble), in.w.to(at::kDouble));
  for (const auto r : {Fp8Recipe::kTensorwise, Fp8Recipe::kRowwise}) {
    SCOPED_TRACE(std::string(lf::quant::fp8_recipe_name(r)));
    const auto stored = lf::quant::fp8_store_weight(in.w, r);
    EXPECT_EQ(stored.data.nbytes() * 2, in.w.nbytes());  // half of bf16's bytes (+ the scales)
    EXPECT_TRUE(at::equal(lf::quant::fp8_stored_forward(in.x, stored, r), lf::quant::fp8_linear_forward(in.x, in.w, r)));
    const auto dx = lf::quant::fp8_stored_grad_input(in.g, stored, r);
    const auto per_step = lf::quant::fp8_linear_grad_input(in.g, in.w, r);
    if (r == Fp8Recipe::kTensorwise) {
      EXPECT_TRUE(at::equal(dx, per_step));
    } else {  // the fold's GEMM skips b's unit scales: the same bits as fp8_mm with them
      const auto ga = lf::quant::fp8_cast(in.g.mul(stored.scale.reciprocal().t().to(in.g.scalar_type())),
                                          lf::quant::fp8_grad_scaling(r, 1));
      const Fp8Tensor ones{stored.data, at::ones({1, stored.data.size(1)}, stored.scale.options())};
      EXPECT_TRUE(at::equal(dx, lf::quant::fp8_mm(ga, ones, in.g.scalar_type(), /*fast_accum=*/false)));
    }
    EXPECT_LT(rel_error(dx, dx_exact), 0.06);
    EXPECT_LT(rel_error(dx, dx_exact), 1.5 * rel_error(per_step, dx_exact) + 1e-3);
  }
}

// dW's reduction dimension is the token count, which cuBLASLt's FP8 GEMM needs a multiple of 16 (LLaMA-Factory's
// fp8 example has 40 tokens a micro-batch): the rows of zeros fp8_linear_grad_weight adds change nothing. The
// reference: torchao's two casts along the tokens and the GEMM on the unpadded operands, which the CPU takes.
TEST(Fp8Linear, GradWeightOfTokensNotAMultipleOf16EqualsTheUnpaddedProduct) {
  at::set_num_threads(1);
  const auto in = inputs(11, 40, 96, 48);
  for (const auto r : {Fp8Recipe::kTensorwise, Fp8Recipe::kRowwise}) {
    SCOPED_TRACE(std::string(lf::quant::fp8_recipe_name(r)));
    const auto g = lf::quant::fp8_cast(in.g, lf::quant::fp8_grad_scaling(r, 0));
    const auto x = lf::quant::fp8_cast(in.x, lf::quant::fp8_input_scaling(r, 0));
    const Fp8Tensor gt{g.data.t(), g.scale.dim() == 2 ? g.scale.t() : g.scale};
    const auto unpadded = lf::quant::fp8_mm(gt, x, at::kBFloat16, /*fast_accum=*/false);
    const auto dw = lf::quant::fp8_linear_grad_weight(in.g, in.x, r, at::kBFloat16);
    EXPECT_EQ(dw.sizes(), (std::vector<int64_t>{48, 96}));
    EXPECT_TRUE(at::equal(dw, unpadded));
  }
}

// q/k/v read one x: their FP8 layers cast it once (fp8_cast_reuse.h), the forward's along K and the weight
// gradients' along the tokens, with the results of three separate casts; an in-place write to x, or
// another view of it, is cast anew. The cast kernel slot counts the casts (it declines each: ATen casts).
int cast_calls = 0;
bool count_cast(const at::Tensor&, const at::Tensor&, const lf::quant::Fp8Scaling&, Fp8Tensor&) {
  ++cast_calls;
  return false;
}

TEST(Fp8CastReuse, LayersSharingAnInputCastItOnce) {
  const auto in = inputs(5, 64, 96, 48);
  const auto x = in.x.clone();
  for (const auto r : {Fp8Recipe::kTensorwise, Fp8Recipe::kRowwise}) {
    SCOPED_TRACE(std::string(lf::quant::fp8_recipe_name(r)));
    std::vector<Fp8Tensor> w;
    for (int i = 0; i < 3; ++i) w.push_back(lf::quant::fp8_store_weight(in.w.roll(i, 0), r));
    std::vector<at::Tensor> fresh;  // each layer's output from a cast of its own (a copy of x: another storage)
    for (int i = 0; i < 3; ++i) fresh.push_back(lf::quant::fp8_stored_forward(x.clone(), w[i], r));
    lf::quant::set_fp8_cast_kernel(&count_cast);
    cast_calls = 0;
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(at::equal(lf::quant::fp8_stored_forward(x, w[i], r), fresh[i])) << i;
    EXPECT_EQ(cast_calls, 1);
    x.mul_(1);  // a write: the version moves, the next cast is a new one
    (void)lf::quant::fp8_stored_forward(x, w[0], r);
    EXPECT_EQ(cast_calls, 2);
    (void)lf::quant::fp8_stored_forward(x.narrow(0, 0, 32), w[0], r);
    EXPECT_EQ(cast_calls, 3);
    // dW of the three: g's column cast each, x's once.
    cast_calls = 0;
    for (int i = 0; i < 3; ++i) {
      const auto g = in.g.roll(i, 1);
      const auto dw = lf::quant::fp8_linear_grad_weight(g, x, r, at::kBFloat16);
      lf::quant::set_fp8_cast_kernel(nullptr);
      EXPECT_TRUE(at::equal(dw, lf::quant::fp8_linear_grad_weight(g, x.clone(), r, at::kBFloat16))) << i;
      lf::quant::set_fp8_cast_kernel(&count_cast);
    }
    EXPECT_EQ(cast_calls, 4);
    lf::quant::set_fp8_cast_kernel(nullptr);
  }
}

// A producer's cast handed to the forward (the fused SwiGLU's of act, down_proj's input): the forward reads it
// and casts nothing, keyed as the reuse above (a write to x or another view casts anew; a tensorwise forward
// is not handed a rowwise cast). Seeded here with the cast of 2x, so that reading it shows in the output.
TEST(Fp8CastReuse, ASeededForwardCastIsReadNotRecomputed) {
  const auto in = inputs(6, 64, 96, 48);
  const auto x = in.x.clone().view({2, 32, 96});
  const auto r = Fp8Recipe::kRowwise;
  const auto w = lf::quant::fp8_store_weight(in.w, r);
  const auto wt = lf::quant::fp8_store_weight(in.w, Fp8Recipe::kTensorwise);
  const auto doubled = lf::quant::fp8_stored_forward(x.mul(2), w, r);
  const auto seed = lf::quant::fp8_cast(x.mul(2).view({64, 96}), lf::quant::fp8_input_scaling(r, 1));
  lf::quant::fp8_seed_forward_cast(x, r, seed);
  lf::quant::set_fp8_cast_kernel(&count_cast);
  cast_calls = 0;
  EXPECT_TRUE(at::equal(lf::quant::fp8_stored_forward(x, w, r), doubled));
  EXPECT_EQ(cast_calls, 0);
  (void)lf::quant::fp8_stored_forward(x, wt, Fp8Recipe::kTensorwise);
  EXPECT_EQ(cast_calls, 1);
  (void)lf::quant::fp8_stored_forward(x.narrow(1, 0, 16), w, r);
  EXPECT_EQ(cast_calls, 2);
  lf::quant::fp8_seed_forward_cast(x, r, seed);
  x.mul_(1);  // a write: the seeded cast is of the bytes before it
  lf::quant::set_fp8_cast_kernel(nullptr);
  const auto fresh = lf::quant::fp8_stored_forward(x.clone(), w, r);
  lf::quant::set_fp8_cast_kernel(&count_cast);
  EXPECT_TRUE(at::equal(lf::quant::fp8_stored_forward(x, w, r), fresh));
  EXPECT_EQ(cast_calls, 3);
  lf::quant::set_fp8_cast_kernel(nullptr);
  EXPECT_THROW(lf::quant::fp8_seed_forward_cast(x.narrow(1, 0, 16), r, seed), lf::ConfigError);  // not x's shape
}

// A gradient's cast handed to a stored weight's input gradient (the fused SwiGLU backward's of dgate for
// gate_proj): read once, only for that g and that weight's scales; seeded with the cast of 2g, so that reading it
// shows in the output. Another weight, a write to g or a second read casts anew.
TEST(Fp8CastReuse, ASeededGradInputCastIsReadOnceForItsWeight) {
  const auto in = inputs(7, 64, 96, 48);
  const auto r = Fp8Recipe::kRowwise;
  const auto g = in.g.clone().view({2, 32, 48});
  const auto w = lf::quant::fp8_store_weight(in.w, r), w2 = lf::quant::fp8_store_weight(in.w.mul(3), r);
  const auto doubled = lf::quant::fp8_stored_grad_input(g.mul(2), w, r);
  const auto plain = lf::quant::fp8_stored_grad_input(g.clone(), w, r);
  const auto col_mul = w.scale.reciprocal().t().to(g.scalar_type());
  const auto seed =
      lf::quant::fp8_cast_scaled_columns(g.mul(2).view({64, 48}), col_mul, lf::quant::fp8_grad_scaling(r, 1));
  lf::quant::set_fp8_cast_kernel(&count_cast);
  cast_calls = 0;
  lf::quant::fp8_seed_grad_input_cast(g, w.scale, r, seed);
  // A cast counts twice: fp8_cast_scaled_columns asks the kernel, then its ATen fallback fp8_cast does.
  (void)lf::quant::fp8_stored_grad_input(g, w2, r);  // another weight's scales: not its cast
  EXPECT_EQ(cast_calls, 2);
  EXPECT_TRUE(at::equal(lf::quant::fp8_stored_grad_input(g, w, r), doubled));
  EXPECT_EQ(cast_calls, 2);
  EXPECT_TRUE(at::equal(lf::quant::fp8_stored_grad_input(g, w, r), plain));  // taken: read once
  EXPECT_EQ(cast_calls, 4);
  lf::quant::fp8_seed_grad_input_cast(g, w.scale, r, seed);
  g.mul_(1);  // a write: the seeded cast is of the bytes before it
  EXPECT_TRUE(at::equal(lf::quant::fp8_stored_grad_input(g, w, r), plain));
  EXPECT_EQ(cast_calls, 6);
  lf::quant::set_fp8_cast_kernel(nullptr);
  EXPECT_THROW(lf::quant::fp8_seed_grad_input_cast(g, w.scale, Fp8Recipe::kTensorwise, seed), lf::ConfigError);
}

TEST(Fp8Cast, ScalesAndNames) {
  EXPECT_EQ(lf::quant::fp8_max(at::ScalarType::Float8_e4m3fn), 448.0);
  EXPECT_EQ(lf::quant::fp8_max(at::ScalarType::Float8_e5m2), 57344.0);
  // amax 3: 448/3 = 149.33 -> rounded down to 128 under rowwise.
  const auto s = lf::quant::fp8_amax_to_scale(at::full({1}, 3.0f), at::ScalarType::Float8_e4m3fn, true);
  EXPECT_EQ(s.item<float>(), 128.0f);
  EXPECT_EQ(lf::quant::fp8_recipe_from_name("rowwise"), Fp8Recipe::kRowwise);
  EXPECT_EQ(lf::quant::fp8_recipe_from_name("rowwise_with_gw_hp"), Fp8Recipe::kRowwiseGwHp);
  EXPECT_EQ(lf::quant::fp8_recipe_name(Fp8Recipe::kRowwiseGwHp), "rowwise_with_gw_hp");
  EXPECT_THROW(lf::quant::fp8_recipe_from_name("delayed"), lf::ConfigError);
}

}  // namespace
