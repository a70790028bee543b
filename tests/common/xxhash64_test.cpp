// XXH64 against Python's xxhash (scripts/fixtures/xxh64_vectors.py printed these values).
#include "lf/common/xxhash64.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace {

std::string every_byte_three_times() {
  std::string s;
  for (int k = 0; k < 3; ++k)
    for (int b = 0; b < 256; ++b) s.push_back(static_cast<char>(b));
  return s + "xyz";
}

std::string sixteen_four_times() {
  std::string s;
  for (int k = 0; k < 4; ++k) s += "0123456789abcdef";
  return s + "tail!";
}

uint64_t one_shot(const std::string& s, uint64_t seed = 0) {
  lf::Xxh64 h(seed);
  h.update(s.data(), s.size());
  return h.digest();
}

}  // namespace

TEST(Xxh64, EqualsPythonsXxhash) {
  EXPECT_EQ(one_shot(""), 0xef46db3751d8e999ull);
  EXPECT_EQ(one_shot("a"), 0xd24ec4f1a98c6e5bull);
  EXPECT_EQ(one_shot("abc"), 0x44bc2cf5ad770999ull);
  EXPECT_EQ(one_shot(every_byte_three_times()), 0xe921a1b45bd779f8ull);
  EXPECT_EQ(one_shot(sixteen_four_times()), 0xfad51bb8376935b1ull);
  EXPECT_EQ(one_shot("abc", 42), 0x13c1d910702770e6ull);
}

TEST(Xxh64, AnySplitIntoUpdatesGivesTheSameDigest) {
  const std::string s = every_byte_three_times();
  for (size_t a : {size_t(1), size_t(7), size_t(31), size_t(32), size_t(33), size_t(100)}) {
    lf::Xxh64 h;
    for (size_t i = 0; i < s.size(); i += a) h.update(s.data() + i, std::min(a, s.size() - i));
    EXPECT_EQ(h.digest(), 0xe921a1b45bd779f8ull) << "pieces of " << a;
  }
}

TEST(Xxh64, AFileHashesLikeItsBytes) {
  const auto path = std::filesystem::temp_directory_path() / ("lf_xxh64_" + std::to_string(::getpid()));
  std::ofstream(path, std::ios::binary) << sixteen_four_times();
  EXPECT_EQ(lf::xxh64_file(path.string()), 0xfad51bb8376935b1ull);
  std::filesystem::remove(path);
}
