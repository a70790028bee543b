#pragma once
// The optimizer state in a checkpoint, in a layout that does not depend on the world size
// or the ZeRO stage (DESIGN "Parallel strategies"): every tensor is one parameter's moment
// over an element range of the flattened parameter, named
//   "<param>.exp_avg" / "<param>.exp_avg_sq"                 the whole parameter (its shape)
//   "<param>.exp_avg@<begin>-<end>" / "...exp_avg_sq@..."    flat elements [begin, end)
// in optimizer.safetensors (one copy: single process, DDP) or optimizer-rank<R>.safetensors
// (one per rank: ZeRO, each holding the ranges that rank owns). A reader assembles any range
// of any parameter from whatever files are there, so N ranks at stage s write what M ranks
// at stage s' read, with no conversion step. Checkpoints written before ranges existed hold
// whole-parameter tensors in optimizer.safetensors and read the same way.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace lf::model {
class SafetensorsFile;
}

namespace lf::ckpt {

inline constexpr const char* kOptimizerFile = "optimizer.safetensors";
std::string optimizer_rank_file(int64_t rank);  // "optimizer-rank3.safetensors"

// The key of moment `moment` ("exp_avg" | "exp_avg_sq") of `param` over [begin, end) of its
// flat elements; the whole parameter when whole.
std::string moment_key(const std::string& param, const std::string& moment, int64_t begin, int64_t end, bool whole);

class OptimizerStateReader {
 public:
  // Indexes every optimizer*.safetensors in dir (none: empty; a run saved before its first
  // optimizer step).
  explicit OptimizerStateReader(const std::filesystem::path& dir);
  ~OptimizerStateReader();
  bool empty() const { return pieces_.empty(); }
  // `out` (fp32 or any float dtype, numel end - begin, contiguous, any device) := elements
  // [begin, end) of `param`'s flattened moment. ConfigError naming the parameter, the range
  // and the folder when some element is in no file.
  void read(const std::string& param, const std::string& moment, int64_t begin, int64_t end, at::Tensor out) const;

 private:
  struct Piece {
    const model::SafetensorsFile* file = nullptr;
    std::string key;
    int64_t begin = 0, end = 0;
  };
  std::filesystem::path dir_;
  std::vector<std::unique_ptr<model::SafetensorsFile>> files_;
  std::map<std::pair<std::string, std::string>, std::vector<Piece>> pieces_;  // (param, moment) -> pieces
};

}  // namespace lf::ckpt
