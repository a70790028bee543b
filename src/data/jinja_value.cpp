// The Jinja renderer's values as Python prints, serialises and compares them (jinja_ast.h): a
// template's output is Python's str() of each value, and tojson is json.dumps(ensure_ascii=False).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "jinja_ast.h"
#include "lf/common/error.h"
#include "lf/common/json_escape.h"

namespace lf::jinja {

Value Value::from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return none();
    case nlohmann::ordered_json::value_t::boolean: return boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
    case nlohmann::ordered_json::value_t::number_unsigned: return integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_float: return real(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List l;
      for (const auto& x : j) l.push_back(from_json(x));
      return new_list(std::move(l));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d.emplace_back(it.key(), from_json(it.value()));
      return new_dict(std::move(d));
    }
    default: return none();
  }
}

bool Value::truthy() const {
  switch (kind) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return b;
    case Kind::kInt: return i != 0;
    case Kind::kFloat: return f != 0;
    case Kind::kString: return !s.empty();
    case Kind::kList: return !list->empty();
    case Kind::kDict: return is_namespace || !dict->empty();
    case Kind::kMacro: return true;
  }
  return false;
}

const Value* Value::find(const std::string& key) const {
  if (kind != Kind::kDict) return nullptr;
  for (const auto& [k, v] : *dict)
    if (k == key) return &v;
  return nullptr;
}

namespace {

std::string float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string quote_repr(const std::string& s) {
  // Python's repr: single quotes unless the text holds one and no double quote.
  const char q = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == static_cast<unsigned char>(q)) out += std::string("\\") + q;
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
    else out += static_cast<char>(c);
  }
  return out + q;
}

std::string json_string(const std::string& s) { return "\"" + lf::json_escape(s) + "\""; }

void json_into(const Value& v, int indent, bool sort_keys, int depth, std::string& out) {
  const std::string nl = indent >= 0 ? "\n" + std::string(static_cast<size_t>(indent * (depth + 1)), ' ') : "";
  const std::string close_nl = indent >= 0 ? "\n" + std::string(static_cast<size_t>(indent * depth), ' ') : "";
  const std::string item_sep = indent >= 0 ? "," : ", ";
  switch (v.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: out += "null"; return;
    case Value::Kind::kBool: out += v.b ? "true" : "false"; return;
    case Value::Kind::kInt: out += std::to_string(v.i); return;
    case Value::Kind::kFloat: out += std::isnan(v.f) ? "NaN" : std::isinf(v.f) ? (v.f > 0 ? "Infinity" : "-Infinity") : float_repr(v.f); return;
    case Value::Kind::kString: out += json_string(v.s); return;
    case Value::Kind::kMacro: LF_THROW(ConfigError, "chat template: tojson of a macro");
    case Value::Kind::kList: {
      if (v.list->empty()) { out += "[]"; return; }
      out += "[";
      for (size_t k = 0; k < v.list->size(); ++k) {
        out += (k ? item_sep : "") + nl;
        json_into((*v.list)[k], indent, sort_keys, depth + 1, out);
      }
      out += close_nl + "]";
      return;
    }
    case Value::Kind::kDict: {
      if (v.dict->empty()) { out += "{}"; return; }
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : *v.dict) items.push_back(&kv);
      if (sort_keys) std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
      out += "{";
      for (size_t k = 0; k < items.size(); ++k) {
        out += (k ? item_sep : "") + nl + json_string(items[k]->first) + ": ";
        json_into(items[k]->second, indent, sort_keys, depth + 1, out);
      }
      out += close_nl + "}";
      return;
    }
  }
}

}  // namespace

std::string repr(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kString: return quote_repr(v.s);
    case Value::Kind::kList: {
      std::string out = v.is_tuple ? "(" : "[";
      for (size_t k = 0; k < v.list->size(); ++k) out += (k ? ", " : "") + repr((*v.list)[k]);
      return out + (v.is_tuple ? (v.list->size() == 1 ? ",)" : ")") : "]");
    }
    case Value::Kind::kDict: {
      if (v.is_namespace) return "<Namespace>";
      std::string out = "{";
      for (size_t k = 0; k < v.dict->size(); ++k)
        out += (k ? ", " : "") + quote_repr((*v.dict)[k].first) + ": " + repr((*v.dict)[k].second);
      return out + "}";
    }
    default: return str(v);
  }
}

std::string str(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined: return "";
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return v.b ? "True" : "False";
    case Value::Kind::kInt: return std::to_string(v.i);
    case Value::Kind::kFloat: return float_repr(v.f);
    case Value::Kind::kString: return v.s;
    case Value::Kind::kMacro: return "<Macro>";
    default: return repr(v);
  }
}

std::string to_json(const Value& v, int indent, bool sort_keys) {
  std::string out;
  json_into(v, indent, sort_keys, 0, out);
  return out;
}

bool equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.number() == b.number();
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.s == b.s;
    case Value::Kind::kList:
      return a.list->size() == b.list->size() &&
             std::equal(a.list->begin(), a.list->end(), b.list->begin(), [](const Value& x, const Value& y) { return equal(x, y); });
    case Value::Kind::kDict: {
      if (a.dict->size() != b.dict->size()) return false;
      for (const auto& [k, x] : *a.dict) {
        const Value* y = b.find(k);
        if (!y || !equal(x, *y)) return false;
      }
      return true;
    }
    case Value::Kind::kMacro: return a.macro == b.macro;
    default: return false;
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.number() < b.number();
  if (a.kind == Value::Kind::kString && b.kind == Value::Kind::kString) return a.s < b.s;
  LF_THROW(ConfigError, "chat template: '<' not supported between {} and {}", kind_name(a), kind_name(b));
}

std::string kind_name(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined: return "undefined '" + v.s + "'";
    case Value::Kind::kNone: return "NoneType";
    case Value::Kind::kBool: return "bool";
    case Value::Kind::kInt: return "int";
    case Value::Kind::kFloat: return "float";
    case Value::Kind::kString: return "str";
    case Value::Kind::kList: return "list";
    case Value::Kind::kDict: return v.is_namespace ? "Namespace" : "dict";
    case Value::Kind::kMacro: return "Macro";
  }
  return "?";
}

}  // namespace lf::jinja
