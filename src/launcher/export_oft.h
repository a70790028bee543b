#pragma once
// lf-train export's merge of an OFT adapter (peft's merge_and_unload of finetuning_type oft's adapter, model/oft.h),
// without torch: each block's rotation by peft's Cayley-Neumann series, then W' = W R_bdᵀ, in fp32.
#include <cstdint>
#include <vector>

namespace lf {

// The rotations [r, b, b] (row-major) from oft_R.weight [r, b(b-1)/2]: Q skew-symmetric with the weight's entries
// row by row in its upper triangle, R = I + 2Q + 2Q² + ... + Q^(terms-1) (peft's _cayley_batch, use_cayley_neumann).
std::vector<float> oft_neumann_rotations(const std::vector<float>& weight, int64_t blocks, int64_t block_size,
                                         int64_t terms);

// w [rows, in] (row-major) becomes w R_bdᵀ: each row's block i of b inputs times R_iᵀ.
void merge_oft(std::vector<float>& w, int64_t rows, int64_t in, const std::vector<float>& rotations, int64_t block_size);

}  // namespace lf
