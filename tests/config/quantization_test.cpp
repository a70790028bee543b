// LLaMA-Factory's quantization keys (src/config/quantization_keys.cpp): QLoRA's settings read into the
// plan's precision section; what lf-train does not implement refused with the reason, where it was set.
#include <gtest/gtest.h>

#include "lf/common/error.h"
#include "lf/config/train_config.h"

using namespace lf::config;

namespace {

const std::string kLora = "model_name_or_path: models/tiny\ndataset: alpaca_en_demo\nfinetuning_type: lora\n";

std::string error_of(const std::string& yaml) {
  try {
    parse_train_config(yaml, {}, "cfg.yaml");
  } catch (const lf::ConfigError& e) {
    return e.what();
  }
  return "";
}

void expect_error(const std::string& yaml, const std::string& part) {
  const auto e = error_of(yaml);
  EXPECT_NE(e.find(part), std::string::npos) << "expected an error containing '" << part << "', got: " << e;
}

}  // namespace

TEST(Quantization, QloraKeysAreRead) {
  const auto p = parse_train_config(kLora + "quantization_bit: 4\nquantization_type: fp4\ndouble_quantization: false\n"
                                            "quantization_method: bnb\nbf16: true\n",
                                    {}, "cfg.yaml")
                     .plan.precision;
  ASSERT_TRUE(p.quantized());
  EXPECT_EQ(*p.quantization_bit, 4);
  EXPECT_EQ(p.quantization_type, "fp4");
  EXPECT_FALSE(p.double_quantization);
  EXPECT_TRUE(p.bf16);
  const auto d = parse_train_config(kLora, {}, "cfg.yaml").plan.precision;
  EXPECT_FALSE(d.quantized());  // LLaMA-Factory's defaults: none; nf4 and double quantization when set
  EXPECT_EQ(d.quantization_type, "nf4");
  EXPECT_TRUE(d.double_quantization);
}

TEST(Quantization, WhatIsNotImplementedIsRefusedWithTheReason) {
  expect_error(kLora + "quantization_bit: 8\n", "LLM.int8()");
  expect_error(kLora + "quantization_bit: 2\n", "bitsandbytes only accepts 4-bit or 8-bit");
  expect_error(kLora + "quantization_bit: 4\nquantization_type: int4\n", "quantization_type: int4");
  expect_error(kLora + "quantization_bit: 4\nquantization_method: gptq\n", "gptq, awq, aqlm, hqq and eetq");
  expect_error(kLora + "quantization_bit: 4\nquantization_device_map: auto\n", "device map");
  expect_error(kLora + "quantization_bit: 4\nuse_dora: true\n", "DoRA over a 4-bit base");
  expect_error(kLora + "quantization_bit: 4\nadapter_name_or_path: a,b\n", "a single adapter");
  expect_error(kLora + "quantization_bit: 4\nadapter_name_or_path: a\ncreate_new_adapter: true\n",
               "cannot create a new adapter upon a quantized model");
}

TEST(Quantization, OnlyLoraAndOftTrainAQuantizedBase) {
  const std::string base = "model_name_or_path: models/tiny\ndataset: alpaca_en_demo\nquantization_bit: 4\n";
  for (const char* method : {"full", "freeze"}) {
    const auto e = error_of(base + "finetuning_type: " + std::string(method) + "\n");
    EXPECT_NE(e.find("quantization is only compatible with the LoRA or OFT method"), std::string::npos) << e;
    EXPECT_NE(e.find("cfg.yaml"), std::string::npos) << e;  // where it was set
  }
  EXPECT_EQ(error_of(base + "finetuning_type: oft\n"), "");  // QOFT (LLaMA-Factory's examples/extras/qoft)
}
