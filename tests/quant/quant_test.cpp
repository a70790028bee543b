// lf::quant against bitsandbytes (bnb_4bit.h): the 4-bit codes, absmax, nested absmax, offset and the
// dequantized weight of random weights of each projection shape, NF4 and FP4, with and without double
// quantization, equal bitsandbytes' CPU backend byte for byte (digests in
// tests/fixtures/quant/bnb_digests.json, made by scripts/fixtures/bnb_quant_reference.py; the
// bnb_quant fixture check regenerates them with bitsandbytes). Plus the format's own properties.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lf/common/xxhash64.h"
#include "lf/quant/bnb_4bit.h"

namespace {

using lf::quant::Bnb4Spec;
using lf::quant::Code4;

std::string digest(const at::Tensor& t) {
  auto c = t.contiguous().cpu();
  lf::Xxh64 h;
  h.update(c.data_ptr(), c.nbytes());
  return fmt::format("{:016x}", h.digest());
}

at::ScalarType dtype_of(const std::string& name) { return name == "bfloat16" ? at::kBFloat16 : at::kFloat; }

nlohmann::json fixture() {
  std::ifstream f(std::string(LF_FIXTURES_DIR) + "/quant/bnb_digests.json");
  return nlohmann::json::parse(f);
}

TEST(BnbQuant, CodeTablesAreBitsandbytes) {
  const auto fx = fixture();
  EXPECT_EQ(digest(at::from_blob(const_cast<float*>(lf::quant::dynamic_map()), {256}, at::kFloat)),
            fx["dynamic_map"].get<std::string>());
  EXPECT_EQ(digest(at::from_blob(const_cast<float*>(lf::quant::code4_values(Code4::kNf4)), {16}, at::kFloat)),
            fx["nf4"].get<std::string>());
}

// Every case of the fixture, tiny and Qwen2.5-7B shapes: each stored tensor and the dequantized
// weight digest-equal to bitsandbytes'.
TEST(BnbQuant, EqualsBitsandbytesBitForBit) {
  const auto fx = fixture();
  ASSERT_GE(fx["cases"].size(), 48u);
  at::set_num_threads(1);  // the offset's mean sums as the reference's single thread does
  for (const auto& c : fx["cases"]) {
    const auto shape = c["shape"].get<std::vector<int64_t>>();
    const auto name = fmt::format("{} {}x{} {} {}{}", c["model"].get<std::string>(), shape[0], shape[1],
                                  c["dtype"].get<std::string>(), c["code"].get<std::string>(),
                                  c["double_quant"].get<bool>() ? " double-quant" : "");
    SCOPED_TRACE(name);
    at::manual_seed(c["seed"].get<uint64_t>());
    const auto w = (at::randn(shape) * 0.02).to(dtype_of(c["dtype"]));
    ASSERT_EQ(digest(w), c["weight"].get<std::string>())
        << "at::randn drew other weights than the reference's torch " << fx["torch"] << ": regenerate the fixture";
    Bnb4Spec spec;
    spec.code = lf::quant::code4_from_name(c["code"].get<std::string>());
    spec.double_quant = c["double_quant"].get<bool>();
    const auto q = lf::quant::quantize_4bit(w, spec);
    EXPECT_EQ(digest(q.data), c["data"].get<std::string>());
    EXPECT_EQ(digest(q.absmax), c["absmax"].get<std::string>());
    if (spec.double_quant) {
      EXPECT_EQ(digest(q.nested_absmax), c["nested_absmax"].get<std::string>());
      EXPECT_EQ(digest(q.offset.reshape({1})), c["offset"].get<std::string>()) << q.offset.item<float>();
    }
    EXPECT_EQ(digest(lf::quant::dequantize_4bit(q, w.scalar_type())), c["dequantized"].get<std::string>());
    if (c.contains("dequantized_bf16")) {
      EXPECT_EQ(digest(lf::quant::dequantize_4bit(q, at::kBFloat16)), c["dequantized_bf16"].get<std::string>());
    }
  }
}

// A block holding +-absmax and zero takes NF4's ends and its zero code; the first element is the
// high nibble.
TEST(BnbQuant, Nf4CodesOfKnownValues) {
  auto w = at::zeros({64});
  w[0] = 0.5;
  w[1] = -0.5;
  w[2] = 0.25;  // 0.5 scaled: nearest NF4 value 0.4407 (code 12)
  Bnb4Spec spec;
  spec.double_quant = false;
  const auto q = lf::quant::quantize_4bit(w, spec);
  ASSERT_EQ(q.data.numel(), 32);
  EXPECT_EQ(q.data[0].item<uint8_t>(), (15 << 4) | 0);
  EXPECT_EQ(q.data[1].item<uint8_t>(), (12 << 4) | 7);
  EXPECT_FLOAT_EQ(q.absmax[0].item<float>(), 0.5f);
  const auto d = lf::quant::dequantize_4bit(q, at::kFloat);
  EXPECT_EQ(d[0].item<float>(), 0.5f);
  EXPECT_EQ(d[1].item<float>(), -0.5f);
  EXPECT_EQ(d[3].item<float>(), 0.0f);
}

// The dequantized weight is within half the widest gap between codes of each block's scale, and the
// nested scales within their own 8-bit step of the exact absmax.
TEST(BnbQuant, RoundTripErrorIsBounded) {
  at::manual_seed(5);
  const auto w = at::randn({96, 40}) * 0.02;  // 3840 elements: 60 blocks, one nested block
  for (const auto code : {Code4::kNf4, Code4::kFp4}) {
    for (const bool dq : {false, true}) {
      Bnb4Spec spec;
      spec.code = code;
      spec.double_quant = dq;
      const auto q = lf::quant::quantize_4bit(w, spec);
      EXPECT_EQ(q.blocks(), 60);
      const auto exact = std::get<0>(w.reshape({60, 64}).abs().max(-1));
      const auto scales = lf::quant::block_scales(q);
      EXPECT_LT((scales - exact).abs().max().item<float>(), dq ? 2e-3f * exact.max().item<float>() : 1e-12f);
      const double gap = code == Code4::kNf4 ? 0.304 : 0.334;  // the widest: NF4 -0.6962 - -1; FP4 1 - 0.6667
      // Within half a gap of the code grid scaled by the block's scale, plus how far the (nested) scale
      // is from the exact absmax.
      const auto err = (lf::quant::dequantize_4bit(q, at::kFloat) - w).abs().reshape({60, 64});
      const auto bound = at::maximum(scales, exact) * (gap / 2) + (scales - exact).abs() + 1e-7;
      EXPECT_TRUE((err <= bound.view({-1, 1})).all().item<bool>())
          << lf::quant::code4_name(code) << (dq ? " nested" : "") << ": worst excess "
          << (err - bound.view({-1, 1})).max().item<float>();
      EXPECT_EQ(q.nbytes(), 1920 + (dq ? 60 + 4 + 4 : 240));
    }
  }
}

TEST(BnbQuant, RefusesOtherTypes) {
  EXPECT_THROW(lf::quant::code4_from_name("int4"), std::exception);
  EXPECT_THROW(lf::quant::quantize_4bit(at::ones({64}, at::kInt), Bnb4Spec{}), std::exception);
}

}  // namespace
