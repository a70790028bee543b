#pragma once
// LLaMA-Factory's AlpacaDatasetConverter / SharegptDatasetConverter: one JSON
// record -> Example. Unlike LLaMA-Factory, which logs and silently drops
// broken sharegpt conversations, these throw ConfigError naming file:line,
// since a silently shrunken dataset is worse than a stop.
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "lf/data/dataset_info.h"
#include "lf/data/example.h"

namespace lf {

void convert_record(const nlohmann::json& record, const DatasetAttr& attr, const std::string& origin,
                    Example& out);

}  // namespace lf
