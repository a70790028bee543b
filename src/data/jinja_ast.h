#pragma once
// The Jinja renderer's values and syntax tree (lf/data/jinja.h). Internal to lf_data:
// jinja_value.cpp (values as Python prints and compares them), jinja_parse.cpp (text -> Program),
// jinja_render.cpp (Program x context -> text), jinja_builtins.cpp (filters, tests, methods).
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lf::jinja {

struct Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;  // Python's insertion order
struct Macro;

// A Python value as Jinja sees it. Lists and dicts are shared (Python's reference semantics: a
// namespace's attribute set in a loop is seen after it, list.append mutates).
struct Value {
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kMacro };
  Kind kind = Kind::kUndefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;  // kString; kUndefined: the name that was missing (for errors)
  std::shared_ptr<List> list;
  std::shared_ptr<Dict> dict;
  std::shared_ptr<const Macro> macro;
  bool is_namespace = false;  // a dict made by namespace(): attributes are its keys, settable
  bool is_tuple = false;      // a list Python holds as a tuple (dict.items(), `(a, b)`): printed with ()

  static Value none() { return with(Kind::kNone); }
  static Value boolean(bool v) { Value x = with(Kind::kBool); x.b = v; return x; }
  static Value integer(int64_t v) { Value x = with(Kind::kInt); x.i = v; return x; }
  static Value real(double v) { Value x = with(Kind::kFloat); x.f = v; return x; }
  static Value string(std::string v) { Value x = with(Kind::kString); x.s = std::move(v); return x; }
  static Value new_list(List v = {}) { Value x = with(Kind::kList); x.list = std::make_shared<List>(std::move(v)); return x; }
  static Value new_dict(Dict v = {}) { Value x = with(Kind::kDict); x.dict = std::make_shared<Dict>(std::move(v)); return x; }
  static Value tuple(List v) { Value x = new_list(std::move(v)); x.is_tuple = true; return x; }
  static Value undefined(std::string name) { Value x; x.s = std::move(name); return x; }
  static Value from_json(const nlohmann::ordered_json& j);

  bool defined() const { return kind != Kind::kUndefined; }
  bool is_number() const { return kind == Kind::kInt || kind == Kind::kFloat || kind == Kind::kBool; }
  double number() const { return kind == Kind::kFloat ? f : kind == Kind::kBool ? (b ? 1 : 0) : static_cast<double>(i); }
  bool truthy() const;
  const Value* find(const std::string& key) const;  // a dict's entry, or null

 private:
  static Value with(Kind k) { Value x; x.kind = k; return x; }
};

std::string str(const Value& v);   // Python's str()
std::string repr(const Value& v);  // Python's repr()
// json.dumps(v, ensure_ascii=False, indent=indent (< 0: none), sort_keys): HF's tojson filter.
std::string to_json(const Value& v, int indent, bool sort_keys);
bool equal(const Value& a, const Value& b);
// a < b as Python orders numbers and strings; throws ConfigError for other pairs.
bool less(const Value& a, const Value& b);
std::string kind_name(const Value& v);

// ---- the syntax tree

struct Expr {
  enum class Kind {
    kLiteral, kName, kList, kDict, kAttr, kIndex, kSlice, kCall, kFilter, kTest, kNot, kNeg, kBinary, kAnd, kOr,
    kCond,
  };
  Kind kind;
  int line = 0;
  Value literal;                                        // kLiteral
  std::string name;                                     // kName, kAttr, kFilter, kTest; kBinary: the operator
  std::vector<std::unique_ptr<Expr>> args;              // operands, items, call arguments (after the callee)
  std::vector<std::pair<std::string, std::unique_ptr<Expr>>> kwargs;  // keyword arguments; kDict: its items
  bool negated = false;                                 // kTest: `is not`
};
using ExprPtr = std::unique_ptr<Expr>;

struct Node;
using Body = std::vector<std::unique_ptr<Node>>;

struct Node {
  enum class Kind { kText, kOutput, kIf, kFor, kSet, kSetBlock, kMacro, kBreak, kContinue, kBlock };
  Kind kind;
  int line = 0;
  std::string text;                      // kText
  ExprPtr expr;                          // kOutput, kFor (the iterable), kSet (the value)
  std::vector<std::pair<ExprPtr, Body>> branches;  // kIf: (condition, body); the else branch's condition null
  std::vector<std::string> targets;      // kFor: loop variables; kSet / kSetBlock: the name (or ns, attr)
  ExprPtr filter;                        // kFor: `if` clause
  Body body, else_body;                  // kFor, kSetBlock, kMacro, kBlock
  std::vector<std::pair<std::string, ExprPtr>> params;  // kMacro: names and defaults (null: none)
};

struct Macro {
  const Node* node = nullptr;
};

struct Program {
  Body body;
};

// The source's tags and text, the whitespace rules applied (jinja_lexer.cpp); comments dropped.
struct Segment {
  enum class Kind { kText, kExpr, kStmt } kind;
  std::string text;
  int line;
};
std::vector<Segment> segments(std::string_view source);

Program parse_program(std::string_view source);
std::string render_program(const Program& p, const nlohmann::ordered_json& context);

}  // namespace lf::jinja
