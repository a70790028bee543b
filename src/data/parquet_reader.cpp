#include "parquet_reader.h"

#include "lf/common/error.h"

#ifdef LF_WITH_PARQUET
#include <arrow/api.h>
#include <arrow/io/file.h>
#include <parquet/arrow/reader.h>
#include <parquet/exception.h>
#endif

namespace lf {

#ifndef LF_WITH_PARQUET

bool parquet_supported() { return false; }

std::vector<nlohmann::json> read_parquet_records(const std::filesystem::path& file) {
  LF_THROW(ConfigError,
           "{} is a Parquet file, but this lf-train was built without Parquet support (LF_WITH_PARQUET=OFF: "
           "no Arrow/Parquet C++ was found); scripts/install_deps.sh --python installs pyarrow into .venv, whose "
           "C++ libraries a fresh scripts/build.sh then uses (or -DLF_WITH_PARQUET=ON -DLF_ARROW_DIR=<pyarrow "
           "folder>); or convert the data to JSON Lines",
           file.string());
}

#else

namespace {

using nlohmann::json;

json cell(const arrow::Array& arr, int64_t i, const std::string& where) {
  if (arr.IsNull(i)) return nullptr;
  switch (arr.type_id()) {
    case arrow::Type::STRING:
      return static_cast<const arrow::StringArray&>(arr).GetString(i);
    case arrow::Type::LARGE_STRING:
      return static_cast<const arrow::LargeStringArray&>(arr).GetString(i);
    case arrow::Type::STRING_VIEW:
      return std::string(static_cast<const arrow::StringViewArray&>(arr).GetView(i));
    case arrow::Type::BOOL:
      return static_cast<const arrow::BooleanArray&>(arr).Value(i);
    case arrow::Type::INT8: return static_cast<const arrow::Int8Array&>(arr).Value(i);
    case arrow::Type::INT16: return static_cast<const arrow::Int16Array&>(arr).Value(i);
    case arrow::Type::INT32: return static_cast<const arrow::Int32Array&>(arr).Value(i);
    case arrow::Type::INT64: return static_cast<const arrow::Int64Array&>(arr).Value(i);
    case arrow::Type::UINT8: return static_cast<const arrow::UInt8Array&>(arr).Value(i);
    case arrow::Type::UINT16: return static_cast<const arrow::UInt16Array&>(arr).Value(i);
    case arrow::Type::UINT32: return static_cast<const arrow::UInt32Array&>(arr).Value(i);
    case arrow::Type::UINT64: return static_cast<const arrow::UInt64Array&>(arr).Value(i);
    case arrow::Type::FLOAT: return static_cast<const arrow::FloatArray&>(arr).Value(i);
    case arrow::Type::DOUBLE: return static_cast<const arrow::DoubleArray&>(arr).Value(i);
    case arrow::Type::LIST: {
      const auto& l = static_cast<const arrow::ListArray&>(arr);
      json out = json::array();
      for (int64_t k = l.value_offset(i); k < l.value_offset(i + 1); ++k)
        out.push_back(cell(*l.values(), k, where));
      return out;
    }
    case arrow::Type::LARGE_LIST: {
      const auto& l = static_cast<const arrow::LargeListArray&>(arr);
      json out = json::array();
      for (int64_t k = l.value_offset(i); k < l.value_offset(i + 1); ++k)
        out.push_back(cell(*l.values(), k, where));
      return out;
    }
    case arrow::Type::STRUCT: {
      const auto& s = static_cast<const arrow::StructArray&>(arr);
      json out = json::object();
      for (int f = 0; f < s.num_fields(); ++f)
        out[s.struct_type()->field(f)->name()] = cell(*s.field(f), i, where);
      return out;
    }
    default:
      LF_THROW(ConfigError, "{}: Parquet column type {} is not supported (use strings, numbers, "
               "lists and structs)", where, arr.type()->ToString());
  }
}

}  // namespace

bool parquet_supported() { return true; }

std::vector<nlohmann::json> read_parquet_records(const std::filesystem::path& file) {
  std::shared_ptr<arrow::Table> table;
  try {
    auto in = arrow::io::ReadableFile::Open(file.string());
    LF_CHECK(in.ok(), ConfigError, "cannot open Parquet file {}: {}", file.string(),
             in.status().ToString());
    auto reader = parquet::arrow::OpenFile(*in, arrow::default_memory_pool());
    LF_CHECK(reader.ok(), ConfigError, "{} is not a readable Parquet file: {}", file.string(),
             reader.status().ToString());
    auto read = (*reader)->ReadTable();
    LF_CHECK(read.ok(), ConfigError, "reading Parquet file {} failed: {}", file.string(),
             read.status().ToString());
    auto combined = (*read)->CombineChunks();
    LF_CHECK(combined.ok(), ConfigError, "{}: {}", file.string(), combined.status().ToString());
    table = *combined;
  } catch (const parquet::ParquetException& e) {
    LF_THROW(ConfigError, "{} is not a readable Parquet file: {}", file.string(), e.what());
  }
  std::vector<nlohmann::json> rows(static_cast<size_t>(table->num_rows()), nlohmann::json::object());
  for (int c = 0; c < table->num_columns(); ++c) {
    const std::string name = table->field(c)->name();
    const auto& chunks = table->column(c)->chunks();
    if (chunks.empty()) continue;
    const arrow::Array& arr = *chunks[0];
    const std::string where = file.string() + " column '" + name + "'";
    for (int64_t r = 0; r < arr.length(); ++r) rows[static_cast<size_t>(r)][name] = cell(arr, r, where);
  }
  return rows;
}

#endif

}  // namespace lf
