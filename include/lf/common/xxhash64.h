#pragma once
// XXH64 (the xxHash 64-bit algorithm, seed 0 by default), streaming: fast enough to checksum
// checkpoint files of many GB as they are read (several GB/s a core). Equal to Python's
// `xxhash.xxh64` (tests/common vectors; scripts/fixtures/xxh64_vectors.py).
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace lf {

class Xxh64 {
 public:
  explicit Xxh64(uint64_t seed = 0);
  void update(const void* data, size_t size);
  uint64_t digest() const;

 private:
  std::array<uint64_t, 4> acc_;
  std::array<unsigned char, 32> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_ = 0;
  uint64_t seed_;
};

// The XXH64 of a whole file, read in large blocks; ConfigError naming the file when it
// cannot be read.
uint64_t xxh64_file(const std::string& path);

}  // namespace lf
