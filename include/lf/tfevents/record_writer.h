#pragma once
// A TFRecord file: each record is
//   uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes |
//   data | uint32 masked CRC-32C of the data
// TensorBoard's event files are TFRecord files of serialized Event protos.
// Not thread-safe: one writer per file, one thread.
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

namespace lf::tfevents {

class RecordWriter {
 public:
  // Creates (truncates) the file; ConfigError naming it when it cannot.
  explicit RecordWriter(const std::filesystem::path& path);
  ~RecordWriter();
  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;

  // ConfigError naming the file when the write fails (a full disk).
  void write(std::string_view data);
  // To the kernel (TensorBoard reads a growing file as it is written).
  void flush();
  const std::filesystem::path& path() const { return path_; }

  // The framed bytes of one record (tests).
  static std::string frame(std::string_view data);

 private:
  std::filesystem::path path_;
  std::FILE* f_ = nullptr;
};

}  // namespace lf::tfevents
