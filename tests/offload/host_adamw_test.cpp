// The host AdamW kernel against torch.optim.AdamW (fixture from
// scripts/fixtures/make_host_adamw_fixture.py), every ISA path this CPU runs,
// and the paths against each other.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "lf/common/error.h"
#include "lf/offload/host_adamw.h"
#include "lf/offload/host_adamw_isa.h"
#include "safetensors_fixture.h"

namespace lf::offload {
namespace {

using test::SafetensorsFixture;

std::string fixture_path() {
  // The live re-check (scripts/fixtures/host_adamw_check.sh) points this at a fresh file.
  const char* fresh = std::getenv("LF_HOST_ADAMW_FIXTURE");
  return fresh && *fresh ? fresh : LF_OFFLOAD_FIXTURE;
}

std::vector<HostAdamWIsa> supported_isas() {
  std::vector<HostAdamWIsa> out;
  for (auto isa : {HostAdamWIsa::kScalar, HostAdamWIsa::kAvx2, HostAdamWIsa::kAvx512})
    if (host_adamw_isa_supported(isa)) out.push_back(isa);
  return out;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Reference rounding, written independently of the kernels: nearest, ties to even.
uint16_t bf16_reference(float f) {
  if (std::isnan(f)) return 0xFFFF;
  const uint32_t u = bits(f);
  const uint32_t lower = u & 0xFFFF, upper = u >> 16;
  if (lower > 0x8000 || (lower == 0x8000 && (upper & 1))) return static_cast<uint16_t>(upper + 1);
  return static_cast<uint16_t>(upper);
}

struct Tolerance {
  double max_rel = 0;
  int64_t differing = 0, total = 0;
};

// Within 1e-6 relative of the parameter or of the learning rate (the size of one step),
// whichever is larger: torch's sqrt is off by an ulp now and then, which moves a step's
// update by ~1e-7 of itself, and near p = 0 that is a large part of p.
void expect_close(const std::vector<float>& ours, const std::vector<float>& ref, double lr, const std::string& what,
                  Tolerance& tol) {
  ASSERT_EQ(ours.size(), ref.size()) << what;
  for (size_t i = 0; i < ours.size(); ++i) {
    const double d = std::abs(static_cast<double>(ours[i]) - ref[i]);
    ASSERT_LE(d, 1e-6 * std::max<double>(std::abs(ref[i]), lr))
        << what << "[" << i << "]: " << ours[i] << " vs torch " << ref[i];
    if (ref[i] != 0) tol.max_rel = std::max(tol.max_rel, d / std::abs(ref[i]));
    tol.differing += bits(ours[i]) != bits(ref[i]);
    ++tol.total;
  }
}

void expect_bitwise(const std::vector<float>& ours, const std::vector<float>& ref, const std::string& what) {
  ASSERT_EQ(ours.size(), ref.size()) << what;
  for (size_t i = 0; i < ours.size(); ++i)
    ASSERT_EQ(bits(ours[i]), bits(ref[i])) << what << "[" << i << "]: " << ours[i] << " vs torch " << ref[i];
}

TEST(HostAdamWFixture, EveryPathMatchesTorchAdamW) {
  const SafetensorsFixture fx(fixture_path());
  const auto meta = nlohmann::json::parse(fx.metadata().at("fixture").get<std::string>());
  const auto lengths = meta.at("lengths").get<std::vector<int64_t>>();
  const auto& cases = meta.at("cases");
  ASSERT_GE(cases.size(), 3u);
  for (HostAdamWIsa isa : supported_isas()) {
    Tolerance tol;
    for (size_t c = 0; c < cases.size(); ++c) {
      const auto& hp = cases[c];
      const auto scales = hp.at("grad_scales").get<std::vector<double>>();
      for (size_t k = 0; k < lengths.size(); ++k) {
        const std::string base = "c" + std::to_string(c) + ".t" + std::to_string(k);
        const std::string what = std::string(host_adamw_isa_name(isa)) + " " + base;
        std::vector<float> p = fx.f32(base + ".p0");
        ASSERT_EQ(static_cast<int64_t>(p.size()), lengths[k]);
        std::vector<float> m(p.size(), 0.0f), v(p.size(), 0.0f);
        std::vector<uint16_t> out(p.size(), 0);
        for (size_t s = 0; s < scales.size(); ++s) {
          const std::vector<float> g = fx.f32(base + ".g" + std::to_string(s));
          HostAdamWStep step{.lr = hp.at("lr").get<double>(), .beta1 = hp.at("betas")[0].get<double>(),
                             .beta2 = hp.at("betas")[1].get<double>(),
                             .eps = hp.at("eps").get<double>(), .weight_decay = hp.at("weight_decay").get<double>(),
                             .step = static_cast<int64_t>(s + 1), .grad_scale = static_cast<float>(scales[s])};
          host_adamw_update_isa(isa, p.data(), m.data(), v.data(), g.data(), out.data(),
                                static_cast<int64_t>(p.size()), step);
        }
        // The moments do not go through sqrt: torch's bits exactly.
        expect_bitwise(m, fx.f32(base + ".m"), what + ".exp_avg");
        expect_bitwise(v, fx.f32(base + ".v"), what + ".exp_avg_sq");
        const std::vector<float> torch_p = fx.f32(base + ".p");
        expect_close(p, torch_p, hp.at("lr").get<double>(), what + ".param", tol);
        const std::vector<uint16_t> torch_bf16 = fx.bf16(base + ".bf16");
        for (size_t i = 0; i < p.size(); ++i) {
          ASSERT_EQ(out[i], bf16_reference(p[i])) << what << ".bf16[" << i << "] of " << p[i];
          if (bits(p[i]) == bits(torch_p[i])) ASSERT_EQ(out[i], torch_bf16[i]) << what << ".bf16[" << i << "]";
          else ASSERT_LE(std::abs(int(out[i]) - int(torch_bf16[i])), 1) << what << ".bf16[" << i << "]";
        }
        if (HasFatalFailure()) return;
      }
    }
    std::printf("[%s] param: %lld of %lld elements differ from torch in the last bits, max relative %.3g\n",
                host_adamw_isa_name(isa), static_cast<long long>(tol.differing), static_cast<long long>(tol.total),
                tol.max_rel);
  }
}

// lr = 0 and grad = 0 leave p unchanged (p * 1 + (-0 * 0) / eps), so the bf16 copy is
// exactly torch's .to(bfloat16) of the input: ties, denormals, +-0, inf, overflow, NaN.
TEST(HostAdamWFixture, Bf16CopyRoundsAsTorch) {
  const SafetensorsFixture fx(fixture_path());
  const std::vector<float> in = fx.f32("bf16.in");
  const std::vector<uint16_t> torch_out = fx.bf16("bf16.out");
  for (HostAdamWIsa isa : supported_isas()) {
    for (size_t len : {in.size(), size_t{13}, size_t{29}}) {  // full vectors and tails
      std::vector<float> p(in.begin(), in.begin() + len), m(len, 0.0f), v(len, 0.0f), g(len, 0.0f);
      std::vector<uint16_t> out(len, 0x1234);
      HostAdamWStep step{.lr = 0.0, .weight_decay = 0.0, .step = 3};
      host_adamw_update_isa(isa, p.data(), m.data(), v.data(), g.data(), out.data(), static_cast<int64_t>(len), step);
      for (size_t i = 0; i < len; ++i) {
        if (!std::isnan(in[i])) {
          ASSERT_EQ(bits(p[i]), bits(in[i])) << host_adamw_isa_name(isa) << " p[" << i << "]";
        }
        ASSERT_EQ(out[i], torch_out[i]) << host_adamw_isa_name(isa) << " bf16 of 0x" << std::hex << bits(in[i]);
      }
    }
  }
}

struct State {
  std::vector<float> p, m, v, g;
  std::vector<uint16_t> out;
};

State random_state(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  State s{std::vector<float>(n), std::vector<float>(n), std::vector<float>(n), std::vector<float>(n),
          std::vector<uint16_t>(n)};
  for (int64_t i = 0; i < n; ++i) {
    s.p[i] = normal(rng);
    s.m[i] = 1e-2f * normal(rng);
    s.v[i] = 1e-4f * std::abs(normal(rng));
    s.g[i] = (i % 17 == 0) ? 0.0f : normal(rng) * std::pow(10.0f, static_cast<float>(i % 5) - 3);
  }
  return s;
}

void expect_same_bits(const State& a, const State& b, const std::string& what) {
  ASSERT_EQ(0, std::memcmp(a.p.data(), b.p.data(), a.p.size() * 4)) << what << " param";
  ASSERT_EQ(0, std::memcmp(a.m.data(), b.m.data(), a.m.size() * 4)) << what << " exp_avg";
  ASSERT_EQ(0, std::memcmp(a.v.data(), b.v.data(), a.v.size() * 4)) << what << " exp_avg_sq";
  ASSERT_EQ(0, std::memcmp(a.out.data(), b.out.data(), a.out.size() * 2)) << what << " bf16";
}

const HostAdamWStep kSteps[] = {
    {.lr = 3e-4, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.1, .step = 1, .grad_scale = 0.7f},
    {.lr = 1e-2, .beta1 = 0.3, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0.0, .step = 2, .grad_scale = 1.0f},
    {.lr = 5e-2, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.01, .step = 1000, .grad_scale = 3.0f},
};

TEST(HostAdamW, EveryPathGivesTheSameBits) {
  const int64_t n = 100003;  // not a multiple of 8 or 16
  State ref = random_state(n, 7);
  for (const auto& s : kSteps)
    host_adamw_update_isa(HostAdamWIsa::kScalar, ref.p.data(), ref.m.data(), ref.v.data(), ref.g.data(),
                          ref.out.data(), n, s);
  for (HostAdamWIsa isa : supported_isas()) {
    State x = random_state(n, 7);
    for (const auto& s : kSteps)
      host_adamw_update_isa(isa, x.p.data(), x.m.data(), x.v.data(), x.g.data(), x.out.data(), n, s);
    expect_same_bits(x, ref, host_adamw_isa_name(isa));
  }
}

TEST(HostAdamW, PoolSplitGivesTheSameBitsAsOneCall) {
  const int64_t n = 3 * kHostAdamWGrain + 777;
  State ref = random_state(n, 11);
  for (const auto& s : kSteps)
    host_adamw_update(ref.p.data(), ref.m.data(), ref.v.data(), ref.g.data(), ref.out.data(), n, s);
  for (int threads : {1, 2, 3, 5}) {
    HostThreadPool pool(threads);
    State x = random_state(n, 11);
    for (const auto& s : kSteps)
      host_adamw_update(pool, x.p.data(), x.m.data(), x.v.data(), x.g.data(), x.out.data(), n, s);
    expect_same_bits(x, ref, std::to_string(threads) + " threads");
  }
}

TEST(HostAdamW, WithoutBf16OutputTheStateIsTheSame) {
  const int64_t n = 4099;
  State a = random_state(n, 5), b = random_state(n, 5);
  host_adamw_update(a.p.data(), a.m.data(), a.v.data(), a.g.data(), a.out.data(), n, kSteps[0]);
  host_adamw_update(b.p.data(), b.m.data(), b.v.data(), b.g.data(), nullptr, n, kSteps[0]);
  b.out = a.out;
  expect_same_bits(a, b, "no bf16");
}

TEST(HostAdamW, GradScaleMultipliesTheGradientFirst) {
  const int64_t n = 999;
  State a = random_state(n, 3), b = random_state(n, 3);
  for (auto& g : b.g) g *= 0.37f;
  HostAdamWStep sa = kSteps[0], sb = kSteps[0];
  sa.grad_scale = 0.37f;
  sb.grad_scale = 1.0f;
  host_adamw_update(a.p.data(), a.m.data(), a.v.data(), a.g.data(), a.out.data(), n, sa);
  host_adamw_update(b.p.data(), b.m.data(), b.v.data(), b.g.data(), b.out.data(), n, sb);
  ASSERT_EQ(0, std::memcmp(a.p.data(), b.p.data(), n * 4));
  ASSERT_EQ(0, std::memcmp(a.v.data(), b.v.data(), n * 4));
}

TEST(HostAdamW, BadStepsAreConfigErrors) {
  float p = 1, m = 0, v = 0, g = 1;
  auto run = [&](HostAdamWStep s, int64_t n = 1) { host_adamw_update(&p, &m, &v, &g, nullptr, n, s); };
  EXPECT_THROW(run({.step = 0}), ConfigError);
  EXPECT_THROW(run({.lr = -1e-3}), ConfigError);
  EXPECT_THROW(run({.beta1 = 1.0}), ConfigError);
  EXPECT_THROW(run({.beta2 = -0.1}), ConfigError);
  EXPECT_THROW(run({.eps = 0.0}), ConfigError);
  EXPECT_THROW(run({.weight_decay = NAN}), ConfigError);
  EXPECT_THROW(run({}, -1), ConfigError);
  EXPECT_THROW(host_adamw_update(nullptr, &m, &v, &g, nullptr, 1, {}), ConfigError);
  EXPECT_NO_THROW(host_adamw_update(nullptr, nullptr, nullptr, nullptr, nullptr, 0, {}));
  try {
    run({.step = 0});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("1-based"), std::string::npos) << e.what();
  }
}

TEST(HostAdamWIsaChoice, NamesAndForcedPaths) {
  EXPECT_TRUE(host_adamw_isa_supported(HostAdamWIsa::kScalar));
  EXPECT_TRUE(host_adamw_isa_supported(host_adamw_isa_for(std::nullopt)));
  EXPECT_EQ(host_adamw_isa_for(std::string("scalar")), HostAdamWIsa::kScalar);
  try {
    host_adamw_isa_for(std::string("avx9"));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("expected avx512, avx2 or scalar"), std::string::npos) << e.what();
  }
  for (auto isa : {HostAdamWIsa::kAvx2, HostAdamWIsa::kAvx512}) {
    if (host_adamw_isa_supported(isa)) {
      EXPECT_EQ(host_adamw_isa_for(std::string(host_adamw_isa_name(isa))), isa);
    } else {
      EXPECT_THROW(host_adamw_isa_for(std::string(host_adamw_isa_name(isa))), ConfigError);
      float x = 0;
      EXPECT_THROW(host_adamw_update_isa(isa, &x, &x, &x, &x, nullptr, 1, {}), ConfigError);
    }
  }
  std::printf("this CPU runs: best %s\n", host_adamw_isa_name(host_adamw_isa_for(std::nullopt)));
}

}  // namespace
}  // namespace lf::offload
