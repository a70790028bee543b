// ScalarLog in a build without protobuf: asking for TensorBoard output is an error that
// says how to get it, never a silent no-op.
#include "lf/common/error.h"
#include "lf/tfevents/record_writer.h"
#include "lf/tfevents/scalar_log.h"

namespace lf::tfevents {

std::unique_ptr<ScalarLog> ScalarLog::open_run(const std::filesystem::path& output_dir) {
  return std::make_unique<ScalarLog>(output_dir / "runs");
}

ScalarLog::ScalarLog(const std::filesystem::path&) {
  LF_THROW(ConfigError,
           "report_to: tensorboard: this lf-train was built without protobuf, so it cannot write TensorBoard event "
           "files. Install libprotobuf-dev and protobuf-compiler (scripts/install_deps.sh does) and rebuild, or drop "
           "tensorboard from report_to");
}

ScalarLog::~ScalarLog() = default;

void ScalarLog::log(const nlohmann::json&, const nlohmann::json&, int64_t) {}
void ScalarLog::add_scalars(int64_t, const std::vector<std::pair<std::string, double>>&, double) {}
const std::filesystem::path& ScalarLog::file() const {
  static const std::filesystem::path none;
  return none;
}
std::string ScalarLog::tag_for(const std::string& key) { return key; }

}  // namespace lf::tfevents
