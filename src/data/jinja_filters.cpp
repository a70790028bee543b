// The Jinja filters and tests chat templates use (jinja_builtins.h), as Jinja2 3.1 defines them, with
// transformers' tojson (json.dumps(x, ensure_ascii=False, indent=indent, sort_keys=sort_keys)).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "jinja_builtins.h"
#include "jinja_text.h"
#include "lf/common/error.h"

namespace lf::jinja {
namespace {

struct Call {
  std::vector<Value> args;  // after the operand
  Kwargs kwargs;
  std::optional<Value> get(size_t n, const char* name) const {
    if (n < args.size()) return args[n];
    for (const auto& [k, v] : kwargs)
      if (k == name) return v;
    return std::nullopt;
  }
};

Call arguments(Evaluator& ev, const Expr& e) {
  Call c;
  for (size_t k = 1; k < e.args.size(); ++k) c.args.push_back(ev.eval(*e.args[k]));
  for (const auto& [k, v] : e.kwargs) c.kwargs.emplace_back(k, ev.eval(*v));
  return c;
}

bool test_named(const std::string& name, const Value& v, const std::vector<Value>& a, int line) {
  auto need = [&](size_t n) {
    LF_CHECK(a.size() >= n, ConfigError, "chat template line {}: the test `{}` needs {} argument(s)", line, name, n);
  };
  if (name == "defined") return v.defined();
  if (name == "undefined") return !v.defined();
  if (name == "none") return v.kind == Value::Kind::kNone;
  if (name == "string") return v.kind == Value::Kind::kString;
  if (name == "number") return v.kind == Value::Kind::kInt || v.kind == Value::Kind::kFloat;
  if (name == "integer") return v.kind == Value::Kind::kInt;
  if (name == "float") return v.kind == Value::Kind::kFloat;
  if (name == "boolean") return v.kind == Value::Kind::kBool;
  if (name == "true") return v.kind == Value::Kind::kBool && v.b;
  if (name == "false") return v.kind == Value::Kind::kBool && !v.b;
  if (name == "mapping") return v.kind == Value::Kind::kDict;
  if (name == "iterable") return v.kind == Value::Kind::kList || v.kind == Value::Kind::kDict || v.kind == Value::Kind::kString;
  if (name == "sequence") return v.kind == Value::Kind::kList || v.kind == Value::Kind::kDict || v.kind == Value::Kind::kString;
  if (name == "callable") return v.kind == Value::Kind::kMacro;
  if (name == "lower") return v.kind == Value::Kind::kString && ascii_lower(v.s) == v.s;
  if (name == "upper") return v.kind == Value::Kind::kString && ascii_upper(v.s) == v.s;
  if (name == "even" || name == "odd") return v.kind == Value::Kind::kInt && (v.i % 2 == 0) == (name == "even");
  if (name == "divisibleby") return need(1), v.kind == Value::Kind::kInt && a[0].i != 0 && v.i % a[0].i == 0;
  if (name == "eq" || name == "equalto" || name == "==") return need(1), equal(v, a[0]);
  if (name == "ne" || name == "!=") return need(1), !equal(v, a[0]);
  if (name == "lt" || name == "lessthan" || name == "<") return need(1), less(v, a[0]);
  if (name == "gt" || name == "greaterthan" || name == ">") return need(1), less(a[0], v);
  if (name == "le" || name == "<=") return need(1), !less(a[0], v);
  if (name == "ge" || name == ">=") return need(1), !less(v, a[0]);
  if (name == "in") return need(1), binary("in", v, a[0], line).b;
  if (name == "sameas") {
    need(1);
    return v.kind == a[0].kind && (v.kind == Value::Kind::kNone || v.kind == Value::Kind::kUndefined ||
                                   (v.kind == Value::Kind::kBool && v.b == a[0].b) || (v.list && v.list == a[0].list) ||
                                   (v.dict && v.dict == a[0].dict));
  }
  LF_THROW(ConfigError, "chat template line {}: the test `{}` is outside the Jinja subset lf-train renders", line, name);
}

Value select(const Value& seq, const Call& c, bool by_attr, bool keep, int line) {
  List out;
  const size_t first = by_attr ? 1 : 0;
  const auto test = c.get(first, "test");
  std::vector<Value> test_args(c.args.begin() + static_cast<long>(std::min(c.args.size(), first + 1)), c.args.end());
  for (const auto& x : iterate(seq, line)) {
    const Value v = by_attr ? attribute(x, c.args.at(0).s) : x;
    const bool hit = test ? test_named(test->s, v, test_args, line) : v.truthy();
    if (hit == keep) out.push_back(x);
  }
  return Value::new_list(std::move(out));
}

int64_t length(const Value& v, int line) {
  switch (v.kind) {
    case Value::Kind::kString: return static_cast<int64_t>(code_points(v.s).size());
    case Value::Kind::kList: return static_cast<int64_t>(v.list->size());
    case Value::Kind::kDict: return static_cast<int64_t>(v.dict->size());
    case Value::Kind::kUndefined: return 0;
    default: LF_THROW(ConfigError, "chat template line {}: object of type '{}' has no len()", line, kind_name(v));
  }
}

Value sorted(const Value& v, const Call& c, int line) {
  std::vector<Value> items = iterate(v, line);
  const auto attr = c.get(2, "attribute");
  const bool reverse = c.get(0, "reverse").value_or(Value::boolean(false)).truthy();
  auto key = [&](const Value& x) { return attr ? attribute(x, attr->s) : x; };
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    return reverse ? less(key(b), key(a)) : less(key(a), key(b));
  });
  return Value::new_list(std::move(items));
}

Value map_values(Evaluator& ev, const Value& seq, const Call& c, int line);
Value filter_named(Evaluator& ev, const std::string& name, const Value& v, const Call& c, int line);

// The filters over sequences and mappings; nullopt: not one of them.
std::optional<Value> sequence_filter(Evaluator& ev, const std::string& name, const Value& v, const Call& c, int line) {
  if (name == "first" || name == "last") {
    const auto items = iterate(v, line);
    if (items.empty()) return Value::undefined(name);
    return name == "first" ? items.front() : items.back();
  }
  if (name == "join") {
    const auto attr = c.get(1, "attribute");
    std::string out, sep = c.get(0, "d").value_or(Value::string("")).s;
    const auto items = iterate(v, line);
    for (size_t k = 0; k < items.size(); ++k) out += (k ? sep : "") + str(attr ? attribute(items[k], attr->s) : items[k]);
    return Value::string(out);
  }
  if (name == "list") return Value::new_list(iterate(v, line));
  if (name == "items") return call_method(v, "items", {}, {}, line);
  if (name == "reverse") {
    if (v.kind == Value::Kind::kString) return slice_value(v, std::nullopt, std::nullopt, -1, line);
    auto items = iterate(v, line);
    std::reverse(items.begin(), items.end());
    return Value::new_list(std::move(items));
  }
  if (name == "select" || name == "reject") return select(v, c, false, name == "select", line);
  if (name == "selectattr" || name == "rejectattr") return select(v, c, true, name == "selectattr", line);
  if (name == "map") return map_values(ev, v, c, line);
  if (name == "sort") return sorted(v, c, line);
  if (name == "unique") {
    List out;
    for (const auto& x : iterate(v, line))
      if (std::none_of(out.begin(), out.end(), [&](const Value& y) { return equal(x, y); })) out.push_back(x);
    return Value::new_list(std::move(out));
  }
  if (name == "dictsort") {
    auto items = call_method(v, "items", {}, {}, line);
    std::stable_sort(items.list->begin(), items.list->end(),
                     [](const Value& a, const Value& b) { return less((*a.list)[0], (*b.list)[0]); });
    return items;
  }
  if (name == "sum" || name == "max" || name == "min") {
    const auto items = iterate(v, line);
    if (name == "sum") {
      Value acc = c.get(1, "start").value_or(Value::integer(0));
      for (const auto& x : items) acc = binary("+", acc, x, line);
      return acc;
    }
    if (items.empty()) return Value::undefined(name);
    Value best = items[0];
    for (const auto& x : items)
      if (name == "max" ? less(best, x) : less(x, best)) best = x;
    return best;
  }
  return std::nullopt;
}

Value filter_named(Evaluator& ev, const std::string& name, const Value& v, const Call& c, int line) {
  if (auto r = sequence_filter(ev, name, v, c, line)) return *r;
  if (name == "length" || name == "count") return Value::integer(length(v, line));
  if (name == "string") return Value::string(str(v));
  if (name == "safe" || name == "e" || name == "escape" || name == "forceescape") {
    if (name == "safe") return v;
    std::string out;
    for (char ch : str(v)) {
      switch (ch) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&#34;"; break;
        case '\'': out += "&#39;"; break;
        default: out += ch;
      }
    }
    return Value::string(out);
  }
  if (name == "trim") {
    const auto chars = c.get(0, "chars");
    return Value::string(py_strip(str(v), chars ? std::optional<std::string>(chars->s) : std::nullopt, true, true));
  }
  if (name == "upper") return Value::string(ascii_upper(str(v)));
  if (name == "lower") return Value::string(ascii_lower(str(v)));
  if (name == "title") return Value::string(py_title(str(v)));
  if (name == "capitalize") return Value::string(py_capitalize(str(v)));
  if (name == "default" || name == "d") {
    const bool boolean = c.get(1, "boolean").value_or(Value::boolean(false)).truthy();
    const bool use_default = boolean ? !v.truthy() : !v.defined();
    return use_default ? c.get(0, "default_value").value_or(Value::string("")) : v;
  }
  if (name == "tojson") {
    const auto indent = c.get(1, "indent");  // transformers' tojson(x, ensure_ascii, indent, separators, sort_keys)
    const auto sort_keys = c.get(3, "sort_keys");
    return Value::string(to_json(v, indent && indent->kind == Value::Kind::kInt ? static_cast<int>(indent->i) : -1,
                                 sort_keys && sort_keys->truthy()));
  }
  if (name == "replace") return call_method(Value::string(str(v)), "replace", c.args, c.kwargs, line);
  if (name == "int") {
    if (v.kind == Value::Kind::kFloat) return Value::integer(static_cast<int64_t>(v.f));
    if (v.is_number()) return Value::integer(static_cast<int64_t>(v.number()));
    try {
      return Value::integer(std::stoll(v.s));
    } catch (...) {
      return c.get(0, "default").value_or(Value::integer(0));
    }
  }
  if (name == "float") {
    if (v.is_number()) return Value::real(v.number());
    try {
      return Value::real(std::stod(v.s));
    } catch (...) {
      return c.get(0, "default").value_or(Value::real(0));
    }
  }
  if (name == "abs") return v.kind == Value::Kind::kInt ? Value::integer(std::llabs(v.i)) : Value::real(std::fabs(v.number()));
  if (name == "round") {
    const auto prec = c.get(0, "precision");
    const double p = std::pow(10.0, prec ? prec->number() : 0);
    return Value::real(std::nearbyint(v.number() * p) / p);
  }
  if (name == "indent") {
    const auto width = c.get(0, "width");
    const std::string pad = width && width->kind == Value::Kind::kString ? width->s
                                                                          : std::string(width ? width->i : 4, ' ');
    const bool first = c.get(1, "first").value_or(Value::boolean(false)).truthy();
    const bool blank = c.get(2, "blank").value_or(Value::boolean(false)).truthy();
    std::string out;
    const auto lines = py_split(str(v), std::string("\n"), -1, false);
    for (size_t k = 0; k < lines.size(); ++k) {
      if (k) out += "\n";
      if ((k > 0 || first) && (blank || !lines[k].empty())) out += pad;
      out += lines[k];
    }
    return Value::string(out);
  }
  if (name == "wordcount") return Value::integer(static_cast<int64_t>(py_split(str(v), std::nullopt, -1, false).size()));
  LF_THROW(ConfigError, "chat template line {}: the filter `{}` is outside the Jinja subset lf-train renders", line, name);
}

// map(attribute='x', default=...) or map('filter', args...).
Value map_values(Evaluator& ev, const Value& seq, const Call& c, int line) {
  List out;
  const auto attr = c.get(99, "attribute");
  for (const auto& x : iterate(seq, line)) {
    if (attr) {
      Value y = attribute(x, attr->s);
      if (!y.defined()) y = c.get(99, "default").value_or(y);
      out.push_back(y);
    } else {
      LF_CHECK(!c.args.empty() && c.args[0].kind == Value::Kind::kString, ConfigError,
               "chat template line {}: map() needs a filter name or attribute=", line);
      Call rest{std::vector<Value>(c.args.begin() + 1, c.args.end()), c.kwargs};
      out.push_back(filter_named(ev, c.args[0].s, x, rest, line));
    }
  }
  return Value::new_list(std::move(out));
}

}  // namespace

Value apply_filter(Evaluator& ev, const Expr& e) {
  const Value v = ev.eval(*e.args[0]);
  return filter_named(ev, e.name, v, arguments(ev, e), e.line);
}

bool apply_test(Evaluator& ev, const Expr& e) {
  const Value v = ev.eval(*e.args[0]);
  return test_named(e.name, v, arguments(ev, e).args, e.line);
}

}  // namespace lf::jinja
