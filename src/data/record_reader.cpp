#include "record_reader.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "lf/common/error.h"
#include "lf/common/hash.h"
#include "parquet_reader.h"

namespace lf {
namespace fs = std::filesystem;

namespace {

std::string extension(const fs::path& p) {
  std::string e = p.extension().string();
  if (!e.empty() && e[0] == '.') e = e.substr(1);
  return e;
}

std::string read_all(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  LF_CHECK(in.good(), ConfigError, "cannot read dataset file {}", file.string());
  std::string s;
  in.seekg(0, std::ios::end);
  s.resize(static_cast<size_t>(in.tellg()));
  in.seekg(0);
  in.read(s.data(), static_cast<std::streamsize>(s.size()));
  return s;
}

bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

void split_lines(const std::string& text, std::vector<RecordSpan>& out) {
  size_t pos = 0;
  int64_t line = 1;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    size_t end = nl == std::string::npos ? text.size() : nl;
    size_t b = pos, e = end;
    while (b < e && is_ws(text[b])) ++b;
    while (e > b && is_ws(text[e - 1])) --e;
    if (e > b) out.push_back({b, e, line});
    ++line;
    pos = end + 1;
  }
}

// Spans of the elements of a top-level JSON array; strings and nesting are
// tracked so commas and brackets inside values do not split.
void split_array(const std::string& text, size_t open, const fs::path& file,
                 std::vector<RecordSpan>& out) {
  int64_t line = 1 + std::count(text.begin(), text.begin() + static_cast<long>(open), '\n');
  int depth = 1;
  bool in_string = false, escape = false;
  size_t start = std::string::npos;
  int64_t start_line = 0;
  for (size_t i = open + 1; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n') ++line;
    if (in_string) {
      if (escape) {
        escape = false;
      } else if (c == '\\') {
        escape = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (depth == 1 && start == std::string::npos && !is_ws(c) && c != ',' && c != ']') {
      start = i;
      start_line = line;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
      if (depth == 0) {
        if (start != std::string::npos) {
          size_t e = i;
          while (e > start && is_ws(text[e - 1])) --e;
          out.push_back({start, e, start_line});
        }
        for (size_t k = i + 1; k < text.size(); ++k)
          LF_CHECK(is_ws(text[k]), ConfigError,
                   "{}:{}: unexpected data after the closing ']' of the top-level array",
                   file.string(), line);
        return;
      }
      if (depth == 1 && start != std::string::npos) {
        out.push_back({start, i + 1, start_line});
        start = std::string::npos;
      }
    } else if (c == ',' && depth == 1) {
      if (start != std::string::npos) {
        size_t e = i;
        while (e > start && is_ws(text[e - 1])) --e;
        out.push_back({start, e, start_line});
        start = std::string::npos;
      }
    }
  }
  LF_THROW(ConfigError, "{}:{}: the top-level JSON array is not closed (file truncated?)",
           file.string(), line);
}

}  // namespace

std::vector<fs::path> list_data_files(const fs::path& path) {
  std::vector<fs::path> files;
  if (fs::is_directory(path)) {
    std::vector<std::string> folders;
    for (const auto& e : fs::directory_iterator(path)) {
      if (e.path().filename().string()[0] == '.') continue;
      if (e.is_regular_file()) files.push_back(e.path());
      else if (e.is_directory()) folders.push_back(e.path().filename().string());
    }
    std::sort(files.begin(), files.end());
    std::sort(folders.begin(), folders.end());
    // LLaMA-Factory reads the files of the folder itself, not of its subfolders (a
    // dataset/train/part-*.parquet layout is file_name: dataset/train).
    LF_CHECK(!files.empty() || folders.empty(), ConfigError,
             "dataset folder {} holds no files, only the folder(s) {}: a folder dataset is the files directly in "
             "it; point \"file_name\" in dataset_info.json at one of those (e.g. {})",
             path.string(), fmt::join(folders, ", "), (path / folders.front()).string());
    LF_CHECK(!files.empty(), ConfigError, "dataset folder {} has no files", path.string());
  } else {
    LF_CHECK(fs::is_regular_file(path), ConfigError,
             "dataset file {} not found; check \"file_name\" in dataset_info.json and `dataset_dir`",
             path.string());
    files.push_back(path);
  }
  const std::string ext = extension(files[0]);
  for (const auto& f : files) {
    const std::string e = extension(f);
    LF_CHECK(e == ext, ConfigError,
             "dataset folder {} mixes file types ({} and {}); LLaMA-Factory requires one type",
             path.string(), ext, e);
    if (e == "parquet" && !parquet_supported()) read_parquet_records(f);  // throws, naming the option
    LF_CHECK(e == "json" || e == "jsonl" || e == "parquet", ConfigError,
             "dataset file {} has type '{}'; lf-train reads json, jsonl and parquet", f.string(), e);
  }
  return files;
}

DataFile read_data_file(const fs::path& file) {
  DataFile df;
  df.path = file;
  LF_CHECK(extension(file) != "parquet", ConfigError,
           "{}: Parquet files are read with read_parquet_records, not as text", file.string());
  df.text = read_all(file);
  // Editors on Windows write a UTF-8 BOM; HF datasets accepts it.
  if (df.text.starts_with("\xEF\xBB\xBF")) df.text.replace(0, 3, 3, ' ');
  size_t first = 0;
  while (first < df.text.size() && is_ws(df.text[first])) ++first;
  if (extension(file) == "json" && first < df.text.size() && df.text[first] == '[')
    split_array(df.text, first, file, df.records);
  else
    split_lines(df.text, df.records);
  return df;
}

uint64_t hash_data_files(const fs::path& path, uint64_t seed) {
  uint64_t h = seed;
  for (const auto& f : list_data_files(path)) {
    h = fnv1a64(f.filename().string(), h);
    h = fnv1a64(read_all(f), h);
  }
  return h;
}

}  // namespace lf
