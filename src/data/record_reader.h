#pragma once
// Reads dataset files into per-record JSON text spans with their line
// numbers, without building one giant DOM: .json (a top-level array, or JSON
// Lines as HF datasets also accepts), .jsonl, folders of shards. Parquet needs
// the LF_WITH_PARQUET build. Records are parsed later, in parallel.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace lf {

struct RecordSpan {
  size_t begin;
  size_t end;
  int64_t line;  // 1-based line where the record starts
};

struct DataFile {
  std::filesystem::path path;
  std::string text;
  std::vector<RecordSpan> records;
};

// The files of a dataset entry (a file, or every file of a folder, sorted).
// Throws ConfigError when missing, of mixed or unsupported types.
std::vector<std::filesystem::path> list_data_files(const std::filesystem::path& path);

// Throws ConfigError with file:line for malformed structure.
DataFile read_data_file(const std::filesystem::path& file);

// File bytes, for cache keys (fnv1a64 over contents).
uint64_t hash_data_files(const std::filesystem::path& path, uint64_t seed);

}  // namespace lf
