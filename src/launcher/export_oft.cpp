#include "export_oft.h"

#include <algorithm>
#include <cstddef>

namespace lf {
namespace {

using Mat = std::vector<float>;  // one b x b block, row-major

Mat matmul(const Mat& a, const Mat& c, int64_t b) {
  Mat out(static_cast<size_t>(b * b), 0.0f);
  for (int64_t i = 0; i < b; ++i)
    for (int64_t k = 0; k < b; ++k) {
      const float aik = a[static_cast<size_t>(i * b + k)];
      for (int64_t j = 0; j < b; ++j) out[static_cast<size_t>(i * b + j)] += aik * c[static_cast<size_t>(k * b + j)];
    }
  return out;
}

void add_scaled(Mat& r, const Mat& m, float alpha) {
  for (size_t i = 0; i < r.size(); ++i) r[i] += alpha * m[i];
}

}  // namespace

std::vector<float> oft_neumann_rotations(const std::vector<float>& weight, int64_t blocks, int64_t b, int64_t terms) {
  const int64_t n = b * (b - 1) / 2;
  std::vector<float> out;
  out.reserve(static_cast<size_t>(blocks * b * b));
  for (int64_t blk = 0; blk < blocks; ++blk) {
    Mat q(static_cast<size_t>(b * b), 0.0f);
    int64_t e = blk * n;
    for (int64_t i = 0; i < b; ++i)  // torch.triu_indices(b, b, 1): row by row above the diagonal
      for (int64_t j = i + 1; j < b; ++j, ++e) {
        q[static_cast<size_t>(i * b + j)] = weight[static_cast<size_t>(e)];
        q[static_cast<size_t>(j * b + i)] = -weight[static_cast<size_t>(e)];
      }
    Mat r(static_cast<size_t>(b * b), 0.0f);
    for (int64_t i = 0; i < b; ++i) r[static_cast<size_t>(i * b + i)] = 1.0f;
    if (terms > 1) {
      add_scaled(r, q, 2.0f);
      if (terms > 2) {
        Mat power = matmul(q, q, b);
        add_scaled(r, power, 2.0f);
        for (int64_t t = 3; t < terms - 1; ++t) {
          power = matmul(power, q, b);
          add_scaled(r, power, 2.0f);
        }
        power = matmul(power, q, b);
        add_scaled(r, power, 1.0f);
      }
    }
    out.insert(out.end(), r.begin(), r.end());
  }
  return out;
}

void merge_oft(std::vector<float>& w, int64_t rows, int64_t in, const std::vector<float>& rotations, int64_t b) {
  std::vector<float> block(static_cast<size_t>(b));
  for (int64_t o = 0; o < rows; ++o) {
    float* wo = w.data() + o * in;
    for (int64_t blk = 0; blk < in / b; ++blk) {
      const float* rot = rotations.data() + blk * b * b;  // R_blk [b, b]
      float* seg = wo + blk * b;
      // seg' [c] = Σ_k seg[k] R[c, k]: the row times R_blkᵀ.
      for (int64_t c = 0; c < b; ++c) {
        double acc = 0;
        for (int64_t k = 0; k < b; ++k) acc += static_cast<double>(seg[k]) * rot[c * b + k];
        block[static_cast<size_t>(c)] = static_cast<float>(acc);
      }
      std::copy(block.begin(), block.end(), seg);
    }
  }
}

}  // namespace lf
