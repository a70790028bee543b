// The Jinja renderer's operators, access rules, string / dict methods and global functions, as Python
// and transformers' sandboxed chat-template environment evaluate them (jinja_builtins.h). Filters and
// tests: jinja_filters.cpp.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <ctime>

#include "jinja_builtins.h"
#include "jinja_text.h"
#include "lf/common/error.h"

namespace lf::jinja {
namespace {

const Value* kwarg(const Kwargs& kwargs, const char* name) {
  for (const auto& [k, v] : kwargs)
    if (k == name) return &v;
  return nullptr;
}

// The n-th argument, by position or name.
std::optional<Value> arg(const std::vector<Value>& args, const Kwargs& kwargs, size_t n, const char* name) {
  if (n < args.size()) return args[n];
  if (const Value* v = kwarg(kwargs, name)) return *v;
  return std::nullopt;
}

std::string text_arg(const std::optional<Value>& v, const char* what, int line) {
  LF_CHECK(v && v->kind == Value::Kind::kString, ConfigError, "chat template line {}: {} expects a string", line, what);
  return v->s;
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

Value arithmetic(const std::string& op, const Value& a, const Value& b, int line) {
  const bool ints = (a.kind == Value::Kind::kInt || a.kind == Value::Kind::kBool) &&
                    (b.kind == Value::Kind::kInt || b.kind == Value::Kind::kBool);
  const int64_t x = a.kind == Value::Kind::kBool ? a.b : a.i, y = b.kind == Value::Kind::kBool ? b.b : b.i;
  const double p = a.number(), q = b.number();
  if (op == "+") return ints ? Value::integer(x + y) : Value::real(p + q);
  if (op == "-") return ints ? Value::integer(x - y) : Value::real(p - q);
  if (op == "*") return ints ? Value::integer(x * y) : Value::real(p * q);
  LF_CHECK(q != 0, ConfigError, "chat template line {}: division by zero", line);
  if (op == "/") return Value::real(p / q);
  if (op == "//") return ints ? Value::integer(floor_div(x, y)) : Value::real(std::floor(p / q));
  if (op == "%") return ints ? Value::integer(x - floor_div(x, y) * y) : Value::real(p - std::floor(p / q) * q);
  if (op == "**") return ints && y >= 0 ? Value::integer(static_cast<int64_t>(std::llround(std::pow(p, q)))) : Value::real(std::pow(p, q));
  LF_THROW(ConfigError, "chat template line {}: unknown operator {}", line, op);
}

bool contains(const Value& hay, const Value& needle, int line) {
  switch (hay.kind) {
    case Value::Kind::kString:
      LF_CHECK(needle.kind == Value::Kind::kString, ConfigError,
               "chat template line {}: 'in <string>' requires a string as left operand, not {}", line, kind_name(needle));
      return hay.s.find(needle.s) != std::string::npos;
    case Value::Kind::kList:
      for (const auto& x : *hay.list)
        if (equal(x, needle)) return true;
      return false;
    case Value::Kind::kDict: return needle.kind == Value::Kind::kString && hay.find(needle.s) != nullptr;
    default:
      LF_THROW(ConfigError, "chat template line {}: argument of type '{}' is not iterable", line, kind_name(hay));
  }
}

Value repeat(const Value& seq, int64_t n) {
  if (seq.kind == Value::Kind::kString) {
    std::string out;
    for (int64_t k = 0; k < n; ++k) out += seq.s;
    return Value::string(out);
  }
  List out;
  for (int64_t k = 0; k < n; ++k) out.insert(out.end(), seq.list->begin(), seq.list->end());
  return Value::new_list(out);
}

Value string_method(const std::string& s, const std::string& name, const std::vector<Value>& args,
                    const Kwargs& kwargs, int line) {
  auto chars = [&](size_t n) -> std::optional<std::string> {
    auto v = arg(args, kwargs, n, "chars");
    if (!v || v->kind == Value::Kind::kNone) return std::nullopt;
    return text_arg(v, name.c_str(), line);
  };
  if (name == "strip") return Value::string(py_strip(s, chars(0), true, true));
  if (name == "lstrip") return Value::string(py_strip(s, chars(0), true, false));
  if (name == "rstrip") return Value::string(py_strip(s, chars(0), false, true));
  if (name == "upper") return Value::string(ascii_upper(s));
  if (name == "lower") return Value::string(ascii_lower(s));
  if (name == "title") return Value::string(py_title(s));
  if (name == "capitalize") return Value::string(py_capitalize(s));
  if (name == "split" || name == "rsplit") {
    auto sep = arg(args, kwargs, 0, "sep");
    auto maxsplit = arg(args, kwargs, 1, "maxsplit");
    const int64_t m = maxsplit && maxsplit->kind == Value::Kind::kInt ? maxsplit->i : -1;
    std::optional<std::string> sp;
    if (sep && sep->kind != Value::Kind::kNone) sp = text_arg(sep, "split", line);
    List out;
    for (auto& piece : py_split(s, sp, m, name == "rsplit")) out.push_back(Value::string(std::move(piece)));
    return Value::new_list(std::move(out));
  }
  if (name == "startswith" || name == "endswith") {
    const auto what = arg(args, kwargs, 0, "prefix");
    std::vector<std::string> options;
    if (what && what->kind == Value::Kind::kList) {
      for (const auto& x : *what->list) options.push_back(text_arg(x, name.c_str(), line));
    } else {
      options.push_back(text_arg(what, name.c_str(), line));
    }
    for (const auto& o : options) {
      const bool hit = name == "startswith" ? s.compare(0, o.size(), o) == 0
                                            : s.size() >= o.size() && s.compare(s.size() - o.size(), o.size(), o) == 0;
      if (hit) return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  if (name == "replace") {
    const auto count = arg(args, kwargs, 2, "count");
    return Value::string(py_replace(s, text_arg(arg(args, kwargs, 0, "old"), "replace", line),
                                    text_arg(arg(args, kwargs, 1, "new"), "replace", line),
                                    count && count->kind == Value::Kind::kInt ? count->i : -1));
  }
  if (name == "find" || name == "rfind" || name == "count") {
    const std::string sub = text_arg(arg(args, kwargs, 0, "sub"), name.c_str(), line);
    if (name == "count") {
      int64_t n = 0;
      for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + std::max<size_t>(sub.size(), 1))) ++n;
      return Value::integer(n);
    }
    const size_t at = name == "find" ? s.find(sub) : s.rfind(sub);
    return Value::integer(at == std::string::npos ? -1 : static_cast<int64_t>(code_points(s.substr(0, at)).size()));
  }
  if (name == "join") {
    std::string out;
    const auto items = iterate(args.at(0), line);
    for (size_t k = 0; k < items.size(); ++k) out += (k ? s : "") + text_arg(items[k], "join", line);
    return Value::string(out);
  }
  if (name == "isdigit" || name == "isspace" || name == "isalpha") {
    bool all = !s.empty();
    for (unsigned char c : s)
      all &= name == "isdigit" ? std::isdigit(c) != 0 : name == "isspace" ? std::isspace(c) != 0 : std::isalpha(c) != 0;
    return Value::boolean(all);
  }
  LF_THROW(ConfigError, "chat template line {}: the string method `{}` is outside the Jinja subset lf-train renders",
           line, name);
}

}  // namespace

Value attribute(const Value& v, const std::string& name) {
  if (v.kind == Value::Kind::kUndefined)
    LF_THROW(ConfigError, "chat template: '{}' is undefined (reading its attribute '{}')", v.s, name);
  if (const Value* x = v.find(name)) return *x;
  return Value::undefined(name);
}

Value item(const Value& v, const Value& key, int line) {
  if (v.kind == Value::Kind::kUndefined)
    LF_THROW(ConfigError, "chat template line {}: '{}' is undefined (reading an item of it)", line, v.s);
  if (v.kind == Value::Kind::kDict) return key.kind == Value::Kind::kString ? attribute(v, key.s) : Value::undefined("item");
  if ((v.kind == Value::Kind::kList || v.kind == Value::Kind::kString) && key.kind == Value::Kind::kInt) {
    if (v.kind == Value::Kind::kList) {
      const int64_t n = static_cast<int64_t>(v.list->size()), k = key.i < 0 ? key.i + n : key.i;
      return k >= 0 && k < n ? (*v.list)[static_cast<size_t>(k)] : Value::undefined("item");
    }
    const auto cps = code_points(v.s);
    const int64_t n = static_cast<int64_t>(cps.size()), k = key.i < 0 ? key.i + n : key.i;
    return k >= 0 && k < n ? Value::string(cps[static_cast<size_t>(k)]) : Value::undefined("item");
  }
  return Value::undefined("item");
}

Value slice_value(const Value& v, std::optional<int64_t> start, std::optional<int64_t> stop,
                  std::optional<int64_t> step, int line) {
  const int64_t st = step.value_or(1);
  LF_CHECK(st != 0, ConfigError, "chat template line {}: slice step cannot be zero", line);
  std::vector<std::string> cps;
  if (v.kind == Value::Kind::kString) cps = code_points(v.s);
  LF_CHECK(v.kind == Value::Kind::kString || v.kind == Value::Kind::kList, ConfigError,
           "chat template line {}: {} cannot be sliced", line, kind_name(v));
  const int64_t n = v.kind == Value::Kind::kString ? static_cast<int64_t>(cps.size()) : static_cast<int64_t>(v.list->size());
  // Python's slice.indices.
  auto norm = [&](std::optional<int64_t> x, int64_t def_pos, int64_t def_neg) {
    if (!x) return st > 0 ? def_pos : def_neg;
    int64_t y = *x < 0 ? *x + n : *x;
    if (st > 0) return std::clamp<int64_t>(y, 0, n);
    return std::clamp<int64_t>(y, -1, n - 1);
  };
  const int64_t a = norm(start, 0, n - 1), b = norm(stop, n, -1);
  std::vector<size_t> idx;
  for (int64_t k = a; st > 0 ? k < b : k > b; k += st) idx.push_back(static_cast<size_t>(k));
  if (v.kind == Value::Kind::kString) {
    std::string out;
    for (size_t k : idx) out += cps[k];
    return Value::string(out);
  }
  List out;
  for (size_t k : idx) out.push_back((*v.list)[k]);
  return Value::new_list(std::move(out));
}

Value binary(const std::string& op, const Value& a, const Value& b, int line) {
  if (op == "==") return Value::boolean(equal(a, b));
  if (op == "!=") return Value::boolean(!equal(a, b));
  if (op == "<") return Value::boolean(less(a, b));
  if (op == ">") return Value::boolean(less(b, a));
  if (op == "<=") return Value::boolean(!less(b, a));
  if (op == ">=") return Value::boolean(!less(a, b));
  if (op == "in") return Value::boolean(contains(b, a, line));
  if (op == "not in") return Value::boolean(!contains(b, a, line));
  if (op == "~") return Value::string(str(a) + str(b));
  for (const Value* x : {&a, &b})
    LF_CHECK(x->defined(), ConfigError, "chat template line {}: '{}' is undefined (operand of {})", line, x->s, op);
  if (op == "+" && a.kind == Value::Kind::kString && b.kind == Value::Kind::kString) return Value::string(a.s + b.s);
  if (op == "+" && a.kind == Value::Kind::kList && b.kind == Value::Kind::kList) {
    List out = *a.list;
    out.insert(out.end(), b.list->begin(), b.list->end());
    return Value::new_list(std::move(out));
  }
  if (op == "*" && (a.kind == Value::Kind::kString || a.kind == Value::Kind::kList) && b.kind == Value::Kind::kInt)
    return repeat(a, b.i);
  if (op == "*" && (b.kind == Value::Kind::kString || b.kind == Value::Kind::kList) && a.kind == Value::Kind::kInt)
    return repeat(b, a.i);
  LF_CHECK(a.is_number() && b.is_number(), ConfigError,
           "chat template line {}: unsupported operand types for {}: '{}' and '{}'", line, op, kind_name(a), kind_name(b));
  return arithmetic(op, a, b, line);
}

std::vector<Value> iterate(const Value& v, int line) {
  switch (v.kind) {
    case Value::Kind::kUndefined: return {};
    case Value::Kind::kList: return *v.list;
    case Value::Kind::kDict: {
      std::vector<Value> keys;
      for (const auto& kv : *v.dict) keys.push_back(Value::string(kv.first));
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> out;
      for (auto& c : code_points(v.s)) out.push_back(Value::string(std::move(c)));
      return out;
    }
    default: LF_THROW(ConfigError, "chat template line {}: '{}' object is not iterable", line, kind_name(v));
  }
}

bool is_global(const std::string& name) {
  return name == "raise_exception" || name == "namespace" || name == "range" || name == "strftime_now" ||
         name == "dict";
}

Value call_global(const std::string& name, const std::vector<Value>& args, const Kwargs& kwargs, int line) {
  if (name == "raise_exception")
    LF_THROW(ConfigError, "the chat template raised an exception: {}", args.empty() ? std::string() : str(args[0]));
  if (name == "namespace" || name == "dict") {
    Value ns = Value::new_dict();
    ns.is_namespace = name == "namespace";
    for (const auto& a : args)
      if (a.kind == Value::Kind::kDict) ns.dict->insert(ns.dict->end(), a.dict->begin(), a.dict->end());
    for (const auto& kv : kwargs) ns.dict->push_back(kv);
    return ns;
  }
  if (name == "range") {
    int64_t a = 0, b = 0, st = 1;
    for (const auto& x : args)
      LF_CHECK(x.kind == Value::Kind::kInt, ConfigError, "chat template line {}: range() takes integers", line);
    if (args.size() == 1) b = args[0].i;
    if (args.size() >= 2) a = args[0].i, b = args[1].i;
    if (args.size() == 3) st = args[2].i;
    LF_CHECK(!args.empty() && st != 0, ConfigError, "chat template line {}: bad range()", line);
    List out;
    for (int64_t k = a; st > 0 ? k < b : k > b; k += st) out.push_back(Value::integer(k));
    return Value::new_list(std::move(out));
  }
  // strftime_now: transformers' datetime.now().strftime(format), local time.
  const std::string fmt_text = text_arg(arg(args, kwargs, 0, "format"), "strftime_now", line);
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[256];
  const size_t n = std::strftime(buf, sizeof buf, fmt_text.c_str(), &tm);
  return Value::string(std::string(buf, n));
}

Value call_method(const Value& self, const std::string& name, const std::vector<Value>& args, const Kwargs& kwargs,
                  int line) {
  if (self.kind == Value::Kind::kString) return string_method(self.s, name, args, kwargs, line);
  if (self.kind == Value::Kind::kDict && !self.is_namespace) {
    if (name == "items" || name == "keys" || name == "values") {
      List out;
      for (const auto& [k, v] : *self.dict)
        out.push_back(name == "items"  ? Value::tuple({Value::string(k), v})
                      : name == "keys" ? Value::string(k)
                                       : v);
      return Value::new_list(std::move(out));
    }
    if (name == "get") {
      const auto key = arg(args, kwargs, 0, "key");
      const Value* v = key && key->kind == Value::Kind::kString ? self.find(key->s) : nullptr;
      return v ? *v : arg(args, kwargs, 1, "default").value_or(Value::none());
    }
  }
  if (self.kind == Value::Kind::kUndefined)
    LF_THROW(ConfigError, "chat template line {}: '{}' is undefined (calling its method `{}`)", line, self.s, name);
  // transformers renders in an ImmutableSandboxedEnvironment: list.append and dict.update are refused there too.
  LF_THROW(ConfigError,
           "chat template line {}: `{}.{}()` is outside the Jinja subset lf-train renders (transformers' sandbox "
           "refuses methods that modify a value)",
           line, kind_name(self), name);
}

}  // namespace lf::jinja
