// neat_packing's attention on a GPU (varlen_attention.h): ATen's flash kernel over the packed
// tokens with per-sequence offsets, which is what torch.nn.attention.varlen_attn calls.
#include "lf/model/varlen_attention.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

#include "lf/model/kernel_paths.h"
#include "lf/common/error.h"
#include "lf/model/host_copies.h"

namespace lf::model {
namespace {

// [B,H,T,D] -> [B*T,H,D]. The layers' q/k/v are transposed views of the projections'
// [B*T, H*D] outputs, so this is a view again (no copy) on the paths they take.
at::Tensor tokens_major(const at::Tensor& x) {
  return x.transpose(1, 2).reshape({x.size(0) * x.size(2), x.size(1), x.size(3)});
}

// window > 0: flash's window_size_left = window - 1 (keys i - window < j <= i), right 0 (causal).
at::Tensor flash_varlen(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const VarlenSegments& s,
                        double scale = 0, int64_t window = 0) {
  const auto sc = scale > 0 ? std::optional<double>(scale) : std::nullopt;
  const auto left = window > 0 ? std::optional<int64_t>(window - 1) : std::nullopt;
  const auto right = window > 0 ? std::optional<int64_t>(0) : std::nullopt;
  return std::get<0>(at::_flash_attention_forward(q, k, v, s.cu_seqlens, s.cu_seqlens, s.max_seqlen, s.max_seqlen,
                                                  /*dropout_p=*/0.0, /*is_causal=*/true,
                                                  /*return_debug_mask=*/false, sc, left, right));
}

// One tiny forward (two sequences, grouped heads) tells whether this torch build and GPU run
// the kernel at all: its refusals (no flash in the build, an older GPU) are errors, not a flag.
bool flash_runs(const c10::Device& device, at::ScalarType dtype, int64_t head_dim) {
  try {
    const at::NoGradGuard no_grad;
    const auto o = at::TensorOptions().device(device).dtype(dtype);
    const auto q = at::zeros({4, 2, head_dim}, o), kv = at::zeros({4, 1, head_dim}, o);
    const VarlenSegments s{at::tensor(std::vector<int32_t>{0, 1, 4}).to(device), 3};
    (void)flash_varlen(q, kv, kv, s);
    return true;
  } catch (const c10::Error&) {
    return false;
  }
}

}  // namespace

VarlenSegments varlen_segments(const at::Tensor& segment_ids, const c10::Device& device) {
  LF_CHECK(segment_ids.dim() == 2, ConfigError, "segment_ids must be [B,T], got {} dims", segment_ids.dim());
  const auto ids = segment_ids.to(at::kCPU, at::kLong).contiguous();
  const int64_t b = ids.size(0), t = ids.size(1);
  const auto* p = ids.data_ptr<int64_t>();
  std::vector<int32_t> starts;
  int64_t longest = 0;
  for (int64_t r = 0; r < b; ++r)
    for (int64_t j = 0; j < t; ++j)
      if (j == 0 || p[r * t + j] != p[r * t + j - 1]) {
        if (!starts.empty()) longest = std::max<int64_t>(longest, r * t + j - starts.back());
        starts.push_back(static_cast<int32_t>(r * t + j));
      }
  if (!starts.empty()) longest = std::max<int64_t>(longest, b * t - starts.back());
  starts.push_back(static_cast<int32_t>(b * t));
  return {to_device(at::tensor(starts), device), longest};
}

bool varlen_attention_supported(const c10::Device& device, at::ScalarType dtype, int64_t head_dim) {
  if (!device.is_cuda() || (dtype != at::kBFloat16 && dtype != at::kHalf)) return false;
  if (head_dim % 8 != 0 || head_dim > 256) return false;
  if (!kernel_paths().varlen_attention) return false;
  static std::mutex mu;
  static std::map<std::tuple<int, int, int64_t>, bool> known;
  const std::lock_guard lock(mu);
  const auto key = std::make_tuple(static_cast<int>(device.index()), static_cast<int>(dtype), head_dim);
  auto it = known.find(key);
  if (it == known.end()) it = known.emplace(key, flash_runs(device, dtype, head_dim)).first;
  return it->second;
}

at::Tensor varlen_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const VarlenSegments& segments, double scale, int64_t window) {
  const int64_t b = q.size(0), h = q.size(1), t = q.size(2), d = q.size(3);
  const auto out = flash_varlen(tokens_major(q), tokens_major(k), tokens_major(v), segments, scale, window);  // [B*T,H,D]
  return out.view({b, t, h, d}).transpose(1, 2);
}

VarlenSegments rows_as_segments(int64_t rows, int64_t t, const c10::Device& device) {
  return {at::arange(0, (rows + 1) * t, t, at::TensorOptions().dtype(at::kInt).device(device)), t};
}

}  // namespace lf::model
