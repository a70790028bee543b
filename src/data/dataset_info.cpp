#include "lf/data/dataset_info.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "lf/common/error.h"

namespace lf {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void set_str(std::string& field, const json& obj, const char* key) {
  if (!obj.contains(key)) return;
  const json& v = obj.at(key);
  field = v.is_string() ? v.get<std::string>() : std::string();
}

json read_dataset_info(const fs::path& dataset_dir, const fs::path& info_path) {
  std::ifstream in(info_path);
  LF_CHECK(in.good(), ConfigError,
           "cannot open {} (dataset_dir: '{}'); set `dataset_dir:` to the folder holding "
           "dataset_info.json",
           info_path.string(), dataset_dir.string());
  std::stringstream ss;
  ss << in.rdbuf();
  json info;
  try {
    info = json::parse(ss.str());
  } catch (const json::parse_error& e) {
    LF_THROW(ConfigError, "{} is not valid JSON: {}", info_path.string(), e.what());
  }
  LF_CHECK(info.is_object(), ConfigError, "{} must be a JSON object of dataset entries",
           info_path.string());
  return info;
}

// The entry's local file; hub-only entries are refused (lf-train reads local files).
fs::path dataset_file(const std::string& name, const json& e, const fs::path& info_path,
                      const fs::path& dataset_dir) {
  if (!e.contains("file_name")) {
    const char* hub = e.contains("hf_hub_url") ? "hf_hub_url"
                      : e.contains("ms_hub_url") ? "ms_hub_url"
                      : e.contains("om_hub_url") ? "om_hub_url"
                      : e.contains("script_url") ? "script_url"
                                                 : nullptr;
    LF_THROW(ConfigError,
             "dataset '{}' in {} has {} but no \"file_name\": lf-train reads local files only; "
             "download the dataset and point \"file_name\" at it",
             name, info_path.string(), hub ? std::string("\"") + hub + "\"" : "no source");
  }
  return dataset_dir / e.at("file_name").get<std::string>();
}

// LLaMA-Factory's join(): every column key present overrides its default; absent keys reset to
// None (set_attr's default).
void apply_columns(DatasetAttr& a, const json& c) {
  set_str(a.prompt, c, "prompt");
  set_str(a.query, c, "query");
  set_str(a.response, c, "response");
  set_str(a.history, c, "history");
  set_str(a.messages, c, "messages");
  set_str(a.system, c, "system");
  set_str(a.tools, c, "tools");
  set_str(a.chosen, c, "chosen");
  set_str(a.rejected, c, "rejected");
  set_str(a.kto_tag, c, "kto_tag");
  if (!c.contains("prompt")) a.prompt.clear();
  if (!c.contains("query")) a.query.clear();
  if (!c.contains("response")) a.response.clear();
  if (!c.contains("messages")) a.messages.clear();
  for (const char* media : {"images", "videos", "audios"})
    LF_CHECK(!c.contains(media), ConfigError,
             "dataset '{}' maps a '{}' column: multimodal data is not supported by lf-train", a.name, media);
}

// As with columns, a tags object resets every tag it does not name.
void apply_tags(DatasetAttr& a, const json& t) {
  for (auto [field, key] : {std::pair{&a.role_tag, "role_tag"}, {&a.content_tag, "content_tag"},
                            {&a.user_tag, "user_tag"}, {&a.assistant_tag, "assistant_tag"},
                            {&a.observation_tag, "observation_tag"},
                            {&a.function_tag, "function_tag"}, {&a.system_tag, "system_tag"}}) {
    field->clear();
    set_str(*field, t, key);
  }
}

DatasetAttr dataset_attr(const std::string& name, const json& e, const fs::path& info_path,
                         const fs::path& dataset_dir) {
  DatasetAttr a;
  a.name = name;
  a.path = dataset_file(name, e, info_path, dataset_dir);
  const std::string formatting = e.value("formatting", "alpaca");
  if (formatting == "alpaca") {
    a.formatting = DataFormat::kAlpaca;
  } else if (formatting == "sharegpt") {
    a.formatting = DataFormat::kSharegpt;
  } else {
    LF_THROW(ConfigError, "dataset '{}': formatting '{}' is not supported (alpaca, sharegpt)",
             name, formatting);
  }
  a.ranking = e.value("ranking", false);
  if (e.contains("num_samples") && e.at("num_samples").is_number_integer())
    a.num_samples = e.at("num_samples").get<int64_t>();
  if (e.contains("columns")) apply_columns(a, e.at("columns"));
  if (e.contains("tags")) apply_tags(a, e.at("tags"));
  return a;
}

}  // namespace

std::vector<DatasetAttr> load_dataset_list(const std::vector<std::string>& names,
                                           const fs::path& dataset_dir) {
  const fs::path info_path = dataset_dir / "dataset_info.json";
  const json info = read_dataset_info(dataset_dir, info_path);
  std::vector<DatasetAttr> out;
  for (const std::string& name : names) {
    if (!info.contains(name)) {
      std::string known;
      for (auto it = info.begin(); it != info.end(); ++it) known += (known.empty() ? "" : ", ") + it.key();
      LF_THROW(ConfigError, "dataset '{}' is not defined in {} (known: {}); add an entry with "
               "\"file_name\" or fix the `dataset:` list",
               name, info_path.string(), known.empty() ? "none" : known);
    }
    out.push_back(dataset_attr(name, info.at(name), info_path, dataset_dir));
  }
  return out;
}

}  // namespace lf
