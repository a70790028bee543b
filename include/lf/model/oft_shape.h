#pragma once
// OFT's shapes without torch (the plan counts parameters with them; oft.cpp builds the weights): the block size
// peft's OFTLayer.update_layer uses on a layer of `in` features.
#include <cstdint>

namespace lf::model {

// peft's adjust_oft_parameters: the divisor of `in` nearest to `p` (the lower one on a tie); `in` when p >= in.
inline int64_t adjust_oft_parameters(int64_t in, int64_t p) {
  if (p >= in) return in;
  int64_t higher = p;
  while (higher <= in && in % higher != 0) ++higher;
  int64_t lower = p;
  while (lower > 1 && in % lower != 0) --lower;
  return p - lower <= higher - p ? lower : higher;
}

// rank 0: block_size, moved to a divisor of `in` when it is not one; else in / rank (rank moved likewise).
// Exactly one of rank and block_size is non-zero (check_oft_config).
inline int64_t oft_block_size_for(int64_t rank, int64_t block_size, int64_t in) {
  if (rank == 0) return in % block_size != 0 || block_size > in ? adjust_oft_parameters(in, block_size) : block_size;
  const int64_t r = in % rank != 0 || rank > in ? adjust_oft_parameters(in, rank) : rank;
  return in / r;
}

// oft_R.weight's element count on that layer: (in / b) blocks of b(b-1)/2.
inline int64_t oft_params(int64_t rank, int64_t block_size, int64_t in) {
  const int64_t b = oft_block_size_for(rank, block_size, in);
  return in / b * (b * (b - 1) / 2);
}

}  // namespace lf::model
