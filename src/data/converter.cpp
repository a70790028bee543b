#include "converter.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lf/common/error.h"

namespace lf {
namespace {

using nlohmann::json;

const json* column(const json& rec, const std::string& name) {
  if (name.empty()) return nullptr;
  auto it = rec.find(name);
  return it == rec.end() ? nullptr : &*it;
}

void require_column(const json& rec, const std::string& name, const char* role,
                    const DatasetAttr& attr, const std::string& origin) {
  LF_CHECK(name.empty() || rec.contains(name), ConfigError,
           "{}: record of dataset '{}' has no '{}' column (the {} column in dataset_info.json); "
           "fix the record or the \"columns\" mapping",
           origin, attr.name, name, role);
}

// Python truthiness of a str-or-None column; other types are errors.
std::string text_of(const json* v, const std::string& col, const std::string& origin) {
  if (v == nullptr || v->is_null()) return "";
  LF_CHECK(v->is_string(), ConfigError, "{}: column '{}' must be a string, got {}", origin, col,
           v->type_name());
  return v->get<std::string>();
}

// A ranking record's chosen or rejected column: a string (alpaca) or a message (sharegpt).
const json& ranked_column(const json& rec, const std::string& col, const char* role, const DatasetAttr& attr,
                          const std::string& origin) {
  LF_CHECK(!col.empty(), ConfigError,
           "dataset '{}' is a ranking dataset (\"ranking\": true) but dataset_info.json maps no '{}' column; add "
           "\"columns\": {{\"chosen\": ..., \"rejected\": ...}} to its entry",
           attr.name, role);
  LF_CHECK(rec.contains(col), ConfigError,
           "{}: record of ranking dataset '{}' has no '{}' column (its {} response); every record of a ranking dataset "
           "needs both a chosen and a rejected response",
           origin, attr.name, col, role);
  return rec.at(col);
}

std::string ranked_text(const json& rec, const std::string& col, const char* role, const DatasetAttr& attr,
                        const std::string& origin) {
  const json& v = ranked_column(rec, col, role, attr, origin);
  LF_CHECK(v.is_string(), ConfigError, "{}: column '{}' ({} response) of dataset '{}' must be a string, got {}", origin,
           col, role, attr.name, v.type_name());
  return v.get<std::string>();
}

// A KTO record's tag: true (desirable) or false (undesirable).
bool kto_tag_of(const json& rec, const DatasetAttr& attr, const std::string& origin) {
  LF_CHECK(rec.contains(attr.kto_tag) && rec.at(attr.kto_tag).is_boolean(), ConfigError,
           "{}: record of KTO dataset '{}' has {} in its '{}' column (the kto_tag column in dataset_info.json); "
           "every record needs true (a desirable response) or false (an undesirable one)",
           origin, attr.name, rec.contains(attr.kto_tag) ? rec.at(attr.kto_tag).dump() : std::string("nothing"),
           attr.kto_tag);
  return rec.at(attr.kto_tag).get<bool>();
}

// LLaMA-Factory's KTO response: [response, ""] when desirable, ["", response] when not.
std::vector<Message> feedback_response(Message m, bool desirable) {
  const Message empty{Role::kAssistant, ""};
  return desirable ? std::vector<Message>{m, empty} : std::vector<Message>{empty, m};
}

void convert_alpaca(const json& rec, const DatasetAttr& attr, const std::string& origin, Example& out) {
  require_column(rec, attr.prompt, "prompt", attr, origin);
  require_column(rec, attr.response, "response", attr, origin);
  if (const json* h = column(rec, attr.history); h != nullptr && h->is_array()) {
    for (const json& turn : *h) {
      LF_CHECK(turn.is_array() && turn.size() == 2 && turn[0].is_string() && turn[1].is_string(),
               ConfigError, "{}: each '{}' entry must be a [prompt, response] pair of strings",
               origin, attr.history);
      out.prompt.push_back({Role::kUser, turn[0].get<std::string>()});
      out.prompt.push_back({Role::kAssistant, turn[1].get<std::string>()});
    }
  }
  std::string query = text_of(column(rec, attr.prompt), attr.prompt, origin);
  std::string input = text_of(column(rec, attr.query), attr.query, origin);
  if (!query.empty() && !input.empty()) query += "\n";
  query += input;
  out.prompt.push_back({Role::kUser, std::move(query)});
  if (!attr.kto_tag.empty()) {
    const json* r = column(rec, attr.response);
    LF_CHECK(r != nullptr && r->is_string(), ConfigError,
             "{}: record of KTO dataset '{}' has no string '{}' column (the response column in dataset_info.json)",
             origin, attr.name, attr.response);
    out.response = feedback_response({Role::kAssistant, r->get<std::string>()}, kto_tag_of(rec, attr, origin));
  } else if (attr.ranking) {
    out.response = {{Role::kAssistant, ranked_text(rec, attr.chosen, "chosen", attr, origin)},
                    {Role::kAssistant, ranked_text(rec, attr.rejected, "rejected", attr, origin)}};
  } else if (const json* r = column(rec, attr.response); r != nullptr && r->is_string()) {
    // LLaMA-Factory keeps a response only when it is a string; the record is then dropped
    // (drop_report.h counts it, with why).
    out.response.push_back({Role::kAssistant, r->get<std::string>()});
  } else if (!attr.response.empty()) {
    out.invalid = r == nullptr || r->is_null() ? fmt::format("'{}' null", attr.response)
                                               : fmt::format("'{}' a {}, not a string", attr.response, r->type_name());
  }
  out.system = text_of(column(rec, attr.system), attr.system, origin);
  out.tools = text_of(column(rec, attr.tools), attr.tools, origin);
}

void convert_sharegpt(const json& rec, const DatasetAttr& attr, const std::string& origin,
                      Example& out) {
  require_column(rec, attr.messages, "messages", attr, origin);
  const json& msgs = rec.at(attr.messages);
  LF_CHECK(msgs.is_array(), ConfigError, "{}: column '{}' must be a list of messages, got {}",
           origin, attr.messages, msgs.type_name());
  auto role_of = [&](const json& m, size_t i) {
    LF_CHECK(m.is_object() && m.contains(attr.role_tag) && m.at(attr.role_tag).is_string(),
             ConfigError, "{}: message #{} has no string '{}' (role tag)", origin, i, attr.role_tag);
    return m.at(attr.role_tag).get<std::string>();
  };
  auto content_of = [&](const json& m, size_t i) {
    LF_CHECK(m.contains(attr.content_tag) && m.at(attr.content_tag).is_string(), ConfigError,
             "{}: message #{} has no string '{}' (content tag)", origin, i, attr.content_tag);
    return m.at(attr.content_tag).get<std::string>();
  };
  size_t first = 0;
  if (!attr.system_tag.empty() && !msgs.empty() && role_of(msgs[0], 0) == attr.system_tag) {
    out.system = content_of(msgs[0], 0);
    first = 1;
  } else {
    out.system = text_of(column(rec, attr.system), attr.system, origin);
  }
  std::vector<Message> aligned;
  for (size_t i = first; i < msgs.size(); ++i) {
    const std::string role = role_of(msgs[i], i);
    const bool odd = (i - first) % 2 == 0;  // user side (turn_idx % 2 == 0)
    Role r;
    if (odd && role == attr.user_tag && !role.empty()) {
      r = Role::kUser;
    } else if (odd && role == attr.observation_tag && !role.empty()) {
      r = Role::kObservation;
    } else if (!odd && role == attr.assistant_tag && !role.empty()) {
      r = Role::kAssistant;
    } else if (!odd && role == attr.function_tag && !role.empty()) {
      r = Role::kFunction;
    } else {
      LF_THROW(ConfigError,
               "{}: message #{} has role '{}' where {} was expected; sharegpt turns must "
               "alternate user ('{}'/'{}') and assistant ('{}'/'{}'), after an optional first "
               "'{}' turn. Fix the conversation or the \"tags\" in dataset_info.json",
               origin, i, role, odd ? "a user turn" : "an assistant turn", attr.user_tag,
               attr.observation_tag, attr.assistant_tag, attr.function_tag, attr.system_tag);
    }
    aligned.push_back({r, content_of(msgs[i], i)});
  }
  out.tools = text_of(column(rec, attr.tools), attr.tools, origin);
  if (attr.ranking) {
    // The conversation is the prompt (it ends with a user turn); the responses are the columns.
    LF_CHECK(aligned.size() % 2 == 1, ConfigError,
             "{}: conversation of ranking dataset '{}' has {} turns after the system turn; it must end with a user "
             "turn (an odd count), the responses being its chosen and rejected columns",
             origin, attr.name, aligned.size());
    out.prompt = std::move(aligned);
    for (auto [col, role] : {std::pair{&attr.chosen, "chosen"}, {&attr.rejected, "rejected"}}) {
      const json& m = ranked_column(rec, *col, role, attr, origin);
      LF_CHECK(m.is_object(), ConfigError, "{}: column '{}' ({} response) of dataset '{}' must be a message object, got {}",
               origin, *col, role, attr.name, m.type_name());
      const std::string r = role_of(m, 0);
      LF_CHECK(r == attr.assistant_tag || r == attr.function_tag, ConfigError,
               "{}: the {} response of dataset '{}' has role '{}'; expected '{}' (or '{}')", origin, role, attr.name, r,
               attr.assistant_tag, attr.function_tag);
      out.response.push_back({r == attr.assistant_tag ? Role::kAssistant : Role::kFunction, content_of(m, 0)});
    }
    return;
  }
  LF_CHECK(aligned.size() % 2 == 0 && !aligned.empty(), ConfigError,
           "{}: conversation has {} turns after the system turn; it must end with an assistant "
           "turn (an even, non-zero count)",
           origin, aligned.size());
  out.response.push_back(aligned.back());
  aligned.pop_back();
  out.prompt = std::move(aligned);
  if (!attr.kto_tag.empty()) out.response = feedback_response(out.response[0], kto_tag_of(rec, attr, origin));
}

}  // namespace

void convert_record(const json& record, const DatasetAttr& attr, const std::string& origin,
                    Example& out) {
  LF_CHECK(record.is_object(), ConfigError, "{}: a record must be a JSON object, got {}", origin,
           record.type_name());
  out = Example{};
  out.origin = origin;
  if (attr.formatting == DataFormat::kAlpaca)
    convert_alpaca(record, attr, origin, out);
  else
    convert_sharegpt(record, attr, origin, out);
}

}  // namespace lf
