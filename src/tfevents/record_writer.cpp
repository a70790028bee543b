#include "lf/tfevents/record_writer.h"

#include <cerrno>
#include <cstring>

#include "lf/common/error.h"
#include "lf/tfevents/crc32c.h"

namespace lf::tfevents {

namespace {

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

}  // namespace

std::string RecordWriter::frame(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  put_le(out, data.size(), 8);
  put_le(out, masked_crc32c(std::string_view(out.data(), 8)), 4);
  out.append(data);
  put_le(out, masked_crc32c(data), 4);
  return out;
}

RecordWriter::RecordWriter(const std::filesystem::path& path) : path_(path) {
  f_ = std::fopen(path.c_str(), "wb");
  LF_CHECK(f_, ConfigError, "cannot create the TensorBoard event file {}: {} (is output_dir writable?)", path.string(),
           std::strerror(errno));
}

RecordWriter::~RecordWriter() {
  if (f_) std::fclose(f_);
}

void RecordWriter::write(std::string_view data) {
  const std::string rec = frame(data);
  LF_CHECK(std::fwrite(rec.data(), 1, rec.size(), f_) == rec.size(), ConfigError,
           "writing the TensorBoard event file {} failed: {} (disk full?)", path_.string(), std::strerror(errno));
}

void RecordWriter::flush() {
  LF_CHECK(std::fflush(f_) == 0, ConfigError, "writing the TensorBoard event file {} failed: {} (disk full?)",
           path_.string(), std::strerror(errno));
}

}  // namespace lf::tfevents
