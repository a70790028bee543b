#include "numpy_random.h"

#include <algorithm>
#include <array>

namespace lf {
namespace {

// numpy's random_interval: the smallest all-ones mask covering max, then draws (32-bit
// while max fits, else 64-bit) until one lands in [0, max]. Both generators use it.
template <typename Rng>
uint64_t masked_interval(Rng& rng, uint64_t max) {
  if (max == 0) return 0;
  uint64_t mask = max;
  for (int s = 1; s <= 32; s <<= 1) mask |= mask >> s;
  uint64_t value;
  if (max <= 0xFFFFFFFFull) {
    while ((value = (rng.next32() & mask)) > max) {
    }
  } else {
    while ((value = (rng.next64() & mask)) > max) {
    }
  }
  return value;
}

constexpr uint32_t kInitA = 0x43b0d7e5, kMultA = 0x931e8875, kInitB = 0x8b51f9dd,
                   kMultB = 0x58f38ded, kMixMultL = 0xca01f9dd, kMixMultR = 0x4973f715;
constexpr int kXShift = 16;
constexpr size_t kPoolSize = 4;

uint32_t hashmix(uint32_t value, uint32_t& hash_const) {
  value ^= hash_const;
  hash_const *= kMultA;
  value *= hash_const;
  value ^= value >> kXShift;
  return value;
}

uint32_t mix(uint32_t x, uint32_t y) {
  uint32_t r = kMixMultL * x - kMixMultR * y;
  r ^= r >> kXShift;
  return r;
}

// SeedSequence(seed).generate_state(4, uint64).
std::array<uint64_t, 4> seed_sequence_state(uint64_t seed) {
  std::vector<uint32_t> entropy;
  if (seed == 0) entropy.push_back(0);
  for (uint64_t s = seed; s > 0; s >>= 32) entropy.push_back(static_cast<uint32_t>(s & 0xFFFFFFFFu));
  std::array<uint32_t, kPoolSize> pool{};
  uint32_t hash_const = kInitA;
  for (size_t i = 0; i < kPoolSize; ++i)
    pool[i] = hashmix(i < entropy.size() ? entropy[i] : 0, hash_const);
  for (size_t src = 0; src < kPoolSize; ++src)
    for (size_t dst = 0; dst < kPoolSize; ++dst)
      if (src != dst) pool[dst] = mix(pool[dst], hashmix(pool[src], hash_const));
  for (size_t src = kPoolSize; src < entropy.size(); ++src)
    for (size_t dst = 0; dst < kPoolSize; ++dst) pool[dst] = mix(pool[dst], hashmix(entropy[src], hash_const));
  std::array<uint32_t, 8> words{};
  uint32_t hb = kInitB;
  for (size_t i = 0; i < words.size(); ++i) {
    uint32_t v = pool[i % kPoolSize];
    v ^= hb;
    hb *= kMultB;
    v *= hb;
    v ^= v >> kXShift;
    words[i] = v;
  }
  std::array<uint64_t, 4> out{};
  for (size_t i = 0; i < 4; ++i) out[i] = static_cast<uint64_t>(words[2 * i]) | (static_cast<uint64_t>(words[2 * i + 1]) << 32);
  return out;
}

constexpr unsigned __int128 kMultiplier =
    (static_cast<unsigned __int128>(2549297995355413924ull) << 64) + 4865540595714422341ull;

}  // namespace

NumpyPcg64::NumpyPcg64(uint64_t seed) {
  auto s = seed_sequence_state(seed);
  unsigned __int128 init_state = (static_cast<unsigned __int128>(s[0]) << 64) + s[1];
  unsigned __int128 init_seq = (static_cast<unsigned __int128>(s[2]) << 64) + s[3];
  state_ = 0;
  inc_ = (init_seq << 1u) | 1u;
  state_ = state_ * kMultiplier + inc_;
  state_ += init_state;
  state_ = state_ * kMultiplier + inc_;
}

uint64_t NumpyPcg64::next64() {
  state_ = state_ * kMultiplier + inc_;
  uint64_t x = static_cast<uint64_t>(state_ >> 64) ^ static_cast<uint64_t>(state_);
  unsigned rot = static_cast<unsigned>(state_ >> 122);
  return (x >> rot) | (x << ((64 - rot) & 63));
}

uint32_t NumpyPcg64::next32() {
  if (has32_) {
    has32_ = false;
    return uint32_;
  }
  uint64_t next = next64();
  has32_ = true;
  uint32_ = static_cast<uint32_t>(next >> 32);
  return static_cast<uint32_t>(next & 0xFFFFFFFFu);
}

uint64_t NumpyPcg64::interval(uint64_t max) {
  return masked_interval(*this, max);
}

double NumpyPcg64::uniform() { return static_cast<double>(next64() >> 11) * (1.0 / 9007199254740992.0); }

std::vector<size_t> interleave_indices(const std::vector<size_t>& lengths,
                                       const std::vector<double>& probabilities, uint64_t seed,
                                       bool oversampling) {
  const size_t k = lengths.size();
  std::vector<size_t> offsets(k, 0);
  for (size_t i = 1; i < k; ++i) offsets[i] = offsets[i - 1] + lengths[i - 1];
  std::vector<size_t> out;
  if (k == 0) return out;
  if (probabilities.empty()) {
    const size_t rows = oversampling ? *std::max_element(lengths.begin(), lengths.end())
                                     : *std::min_element(lengths.begin(), lengths.end());
    for (size_t r = 0; r < rows; ++r)
      for (size_t i = 0; i < k; ++i)
        if (lengths[i] > 0) out.push_back(offsets[i] + r % lengths[i]);
    return out;
  }
  // Generator.choice(k, size=1000, p): searchsorted(cumsum(p) / sum, u, 'right').
  std::vector<double> cdf(k);
  double acc = 0;
  for (size_t i = 0; i < k; ++i) cdf[i] = acc += probabilities[i];
  for (double& c : cdf) c /= cdf.back();
  NumpyPcg64 rng(seed);
  std::vector<bool> exhausted(k, false);
  std::vector<size_t> current(k, 0);
  auto stop = [&] {
    return oversampling ? std::all_of(exhausted.begin(), exhausted.end(), [](bool b) { return b; })
                        : std::any_of(exhausted.begin(), exhausted.end(), [](bool b) { return b; });
  };
  while (true) {
    // numpy draws in blocks of 1000; drawing one at a time consumes the same stream.
    double u = rng.uniform();
    size_t src = static_cast<size_t>(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
    if (src >= k) src = k - 1;
    if (stop()) break;
    out.push_back(current[src] + offsets[src]);
    if (++current[src] >= lengths[src]) {
      exhausted[src] = true;
      current[src] = 0;
    }
  }
  return out;
}

NumpyLegacyRandom::NumpyLegacyRandom(uint32_t seed) {
  for (int pos = 0; pos < 624; ++pos) {
    key_[pos] = seed;
    seed = 1812433253u * (seed ^ (seed >> 30)) + static_cast<uint32_t>(pos) + 1u;
  }
  pos_ = 624;
}

void NumpyLegacyRandom::generate() {
  constexpr int kN = 624, kM = 397;
  constexpr uint32_t kMatrixA = 0x9908b0dfu, kUpper = 0x80000000u, kLower = 0x7fffffffu;
  int i = 0;
  uint32_t y;
  for (; i < kN - kM; ++i) {
    y = (key_[i] & kUpper) | (key_[i + 1] & kLower);
    key_[i] = key_[i + kM] ^ (y >> 1) ^ (-(y & 1u) & kMatrixA);
  }
  for (; i < kN - 1; ++i) {
    y = (key_[i] & kUpper) | (key_[i + 1] & kLower);
    key_[i] = key_[i + (kM - kN)] ^ (y >> 1) ^ (-(y & 1u) & kMatrixA);
  }
  y = (key_[kN - 1] & kUpper) | (key_[0] & kLower);
  key_[kN - 1] = key_[kM - 1] ^ (y >> 1) ^ (-(y & 1u) & kMatrixA);
  pos_ = 0;
}

uint32_t NumpyLegacyRandom::next32() {
  if (pos_ == 624) generate();
  uint32_t y = key_[pos_++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

uint64_t NumpyLegacyRandom::next64() {
  uint64_t hi = next32();
  return (hi << 32) | next32();
}

uint64_t NumpyLegacyRandom::interval(uint64_t max) {
  return masked_interval(*this, max);
}

std::vector<size_t> NumpyLegacyRandom::sample(size_t n, size_t k) {
  std::vector<size_t> perm(n);
  for (size_t i = 0; i < n; ++i) perm[i] = i;
  for (size_t i = n; i-- > 1;) std::swap(perm[i], perm[static_cast<size_t>(interval(i))]);
  if (k <= n) {
    perm.resize(k);
    return perm;
  }
  for (size_t extra = k - n; extra > 0; --extra) perm.push_back(static_cast<size_t>(interval(n - 1)));
  return perm;
}

std::vector<size_t> numpy_permutation(uint64_t seed, size_t n) {
  std::vector<size_t> perm(n);
  for (size_t i = 0; i < n; ++i) perm[i] = i;
  NumpyPcg64 rng(seed);
  for (size_t i = n; i-- > 1;) {
    size_t j = static_cast<size_t>(rng.interval(i));
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

}  // namespace lf
