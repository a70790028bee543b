#pragma once
// Parquet dataset files through Apache Arrow/Parquet C++ (LF_WITH_PARQUET):
// each row becomes the JSON record the converters take (strings, numbers,
// bools, lists, structs), so Parquet and JSON datasets share one code path.
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

namespace lf {

// True when this build can read Parquet.
bool parquet_supported();

// Throws ConfigError naming LF_WITH_PARQUET when unsupported, or naming the
// file and column for unreadable files / unsupported column types.
std::vector<nlohmann::json> read_parquet_records(const std::filesystem::path& file);

}  // namespace lf
