#include "lf/ckpt/format.h"

#include "lf/common/error.h"

namespace lf::ckpt {

void check_format_version(const nlohmann::json& lf_state, const std::filesystem::path& dir) {
  const auto& v = lf_state.contains("format_version") ? lf_state["format_version"] : nlohmann::json(1);
  LF_CHECK(v.is_number_integer() && v.get<int64_t>() >= 1, ConfigError,
           "resume_from_checkpoint: {}: format_version {} in lf_trainer_state.json is not a version number",
           dir.string(), v.dump());
  LF_CHECK(v.get<int64_t>() <= kCheckpointFormat, ConfigError,
           "resume_from_checkpoint: {} was written in checkpoint format {}, newer than this lf-train reads (up to {}): "
           "resume it with the lf-train that wrote it, or a newer one",
           dir.string(), v.get<int64_t>(), kCheckpointFormat);
}

}  // namespace lf::ckpt
