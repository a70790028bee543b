// lf-host-adamw-bench: host AdamW steps per second over n fp32 parameters, and the
// memory ceiling of its access pattern on the same threads. One JSON line per run;
// scripts/bench/host_adamw_bench.sh runs it beside torch.optim.AdamW.
//   lf-host-adamw-bench --n 67108864 --threads 1,2 [--steps 7] [--isa avx2] [--bf16] [--ceiling]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "lf/common/error.h"
#include "lf/offload/host_adamw.h"
#include "lf/offload/host_adamw_isa.h"

namespace {

using lf::offload::HostThreadPool;
using Clock = std::chrono::steady_clock;

template <typename T>
struct Freer {
  void operator()(T* p) const { std::free(p); }
};
template <typename T>
using Buffer = std::unique_ptr<T[], Freer<T>>;

template <typename T>
Buffer<T> alloc(int64_t n) {
  const size_t bytes = (static_cast<size_t>(n) * sizeof(T) + 63) / 64 * 64;
  return Buffer<T>(static_cast<T*>(std::aligned_alloc(64, bytes)));
}

struct Arrays {
  Buffer<float> p, m, v, g;
  Buffer<uint16_t> out;
};

// First touch by the pool's own threads, range for range as the kernel will use them.
Arrays make_arrays(HostThreadPool& pool, int64_t n) {
  Arrays a{alloc<float>(n), alloc<float>(n), alloc<float>(n), alloc<float>(n), alloc<uint16_t>(n)};
  pool.parallel_for(n, lf::offload::kHostAdamWGrain, [&](int64_t b, int64_t e) {
    uint32_t x = static_cast<uint32_t>(b) * 2654435761u + 1;
    for (int64_t i = b; i < e; ++i) {
      x = x * 1664525u + 1013904223u;
      const float r = static_cast<float>(x >> 8) * (1.0f / 16777216.0f) - 0.5f;  // [-0.5, 0.5)
      a.p[i] = r;
      a.g[i] = r * 1e-2f;
      a.m[i] = 0;
      a.v[i] = 0;
      a.out[i] = 0;
    }
  });
  return a;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <typename F>
std::vector<double> time_steps(int steps, F&& step) {
  step(0);  // warm-up: page faults, caches
  std::vector<double> times;
  for (int s = 1; s <= steps; ++s) {
    const auto t0 = Clock::now();
    step(s);
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return times;
}

void emit(const char* impl, const char* isa, int64_t n, int threads, bool bf16, double bytes_per_elem,
          const std::vector<double>& times) {
  const double med = median(times), best = *std::min_element(times.begin(), times.end());
  std::printf(
      "{\"impl\": \"%s\", \"isa\": \"%s\", \"n\": %lld, \"threads\": %d, \"bf16\": %s, \"steps\": %zu, "
      "\"median_s\": %.6f, \"min_s\": %.6f, \"params_per_s\": %.4g, \"params_per_s_per_core\": %.4g, "
      "\"gb_per_s\": %.2f}\n",
      impl, isa, static_cast<long long>(n), threads, bf16 ? "true" : "false", times.size(), med, best, n / med,
      n / med / threads, n * bytes_per_elem / med / 1e9);
  std::fflush(stdout);
}

// Times the kernel (and, with `ceiling`, its bare memory pattern) at each thread count.
void run(int64_t n, const std::vector<int>& threads_list, int steps, lf::offload::HostAdamWIsa isa, bool bf16,
         bool ceiling) {
  using namespace lf::offload;
  for (int threads : threads_list) {
    HostThreadPool pool(threads);
    Arrays a = make_arrays(pool, n);
    uint16_t* out = bf16 ? a.out.get() : nullptr;
    auto adam = time_steps(steps, [&](int s) {
      const HostAdamWStep st{.lr = 1e-3, .weight_decay = 0.01, .step = s + 1};
      pool.parallel_for(n, kHostAdamWGrain, [&](int64_t b, int64_t e) {
        host_adamw_update_isa(isa, a.p.get() + b, a.m.get() + b, a.v.get() + b, a.g.get() + b, out ? out + b : nullptr,
                              e - b, st);
      });
    });
    emit("lf_host_adamw", host_adamw_isa_name(isa), n, threads, bf16, bf16 ? 30 : 28, adam);
    if (!ceiling) continue;
    // Same streams, same pieces, no arithmetic worth the name: read p m v g, write p m v.
    auto copy = time_steps(steps, [&](int) {
      pool.parallel_for(n, kHostAdamWGrain, [&](int64_t b, int64_t e) {
        float* __restrict p = a.p.get();
        float* __restrict m = a.m.get();
        float* __restrict v = a.v.get();
        const float* __restrict g = a.g.get();
        for (int64_t i = b; i < e; ++i) {
          p[i] += g[i];
          m[i] -= g[i];
          v[i] += g[i];
        }
      });
    });
    emit("memory_pattern_ceiling", "baseline", n, threads, false, 28, copy);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"host AdamW throughput"};
  int64_t n = int64_t{64} << 20;
  std::vector<int> threads_list{1};
  int steps = 7;
  std::string isa_name;
  bool bf16 = false, ceiling = false;
  app.add_option("--n", n, "fp32 parameters")->check(CLI::PositiveNumber);
  app.add_option("--threads", threads_list, "thread counts")->delimiter(',');
  app.add_option("--steps", steps, "timed steps (median reported)")->check(CLI::PositiveNumber);
  app.add_option("--isa", isa_name, "avx512 | avx2 | scalar (default: LF_HOST_ADAM_ISA, else the best here)");
  app.add_flag("--bf16", bf16, "also write the bf16 copy of the updated parameters");
  app.add_flag("--ceiling", ceiling, "also time the kernel's memory pattern without its arithmetic");
  CLI11_PARSE(app, argc, argv);
  try {
    // Without --isa: the process-wide choice host_adamw_update makes (LF_HOST_ADAM_ISA or the best).
    using lf::offload::host_adamw_isa;
    run(n, threads_list, steps, isa_name.empty() ? host_adamw_isa() : lf::offload::host_adamw_isa_for(isa_name),
        bf16, ceiling);
  } catch (const lf::Error& e) {
    std::fprintf(stderr, "lf-host-adamw-bench: %s\n", e.what());
    return e.exit_code();
  }
  return 0;
}
