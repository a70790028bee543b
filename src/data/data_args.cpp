#include "lf/data/data_args.h"

namespace lf {

std::filesystem::path DataArgs::resolve(const std::string& p) const {
  std::filesystem::path path(p);
  return path.is_absolute() ? path : base_dir / path;
}

}  // namespace lf
