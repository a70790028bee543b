#include "outputs.h"

#include <algorithm>
#include <cmath>

#include "lf/common/error.h"

namespace lf::train {
namespace fs = std::filesystem;

std::string format_timedelta(double seconds) {
  const auto s = static_cast<int64_t>(std::max(0.0, seconds));
  return fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
}

TrainerLogWriter::TrainerLogWriter(const fs::path& file) : out_(file, std::ios::app) {
  LF_CHECK(out_.good(), ConfigError, "cannot write {}", file.string());
}

void TrainerLogWriter::write(const nlohmann::ordered_json& line) {
  out_ << line.dump() << "\n";
  out_.flush();
}

void write_json_file(const fs::path& file, const nlohmann::json& obj, int indent) {
  const fs::path tmp = file.string() + ".tmp";
  {
    std::ofstream out(tmp);
    LF_CHECK(out.good(), ConfigError, "cannot write {}", tmp.string());
    out << obj.dump(indent) << "\n";  // nlohmann::json keeps keys sorted, as sort_keys=True
    out.flush();
    if (!out.good()) {
      out.close();
      std::error_code ignored;
      fs::remove(tmp, ignored);
      LF_THROW(ConfigError, "write to {} failed (disk full?); the partial file is removed", tmp.string());
    }
  }
  fs::rename(tmp, file);
}

}  // namespace lf::train
