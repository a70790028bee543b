#pragma once
// The Jinja renderer's built-ins (jinja_builtins.cpp): operators, attribute and item access, iteration,
// the filters, tests, string / dict methods and global functions chat templates use. Internal to lf_data.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "jinja_ast.h"

namespace lf::jinja {

using Kwargs = std::vector<std::pair<std::string, Value>>;

// What a filter or test needs of the renderer (jinja_render.cpp).
class Evaluator {
 public:
  virtual ~Evaluator() = default;
  virtual Value eval(const Expr& e) = 0;
  virtual Value call_macro(const Value& macro, std::vector<Value> args, const Kwargs& kwargs) = 0;
};

Value attribute(const Value& v, const std::string& name);
Value item(const Value& v, const Value& key, int line);
Value slice_value(const Value& v, std::optional<int64_t> start, std::optional<int64_t> stop,
                  std::optional<int64_t> step, int line);
Value binary(const std::string& op, const Value& a, const Value& b, int line);
// A for loop's items: a list's, a dict's keys, a string's characters; nothing for undefined.
std::vector<Value> iterate(const Value& v, int line);

bool is_global(const std::string& name);
Value call_global(const std::string& name, const std::vector<Value>& args, const Kwargs& kwargs, int line);
Value call_method(const Value& self, const std::string& name, const std::vector<Value>& args, const Kwargs& kwargs,
                  int line);

// e.kind == kFilter / kTest: the operand is e.args[0], the arguments follow.
Value apply_filter(Evaluator& ev, const Expr& e);
bool apply_test(Evaluator& ev, const Expr& e);

}  // namespace lf::jinja
