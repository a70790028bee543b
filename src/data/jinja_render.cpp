// Program x context -> text (jinja_ast.h): Jinja's scoping (a loop body's `set` stays in the loop,
// namespaces carry values out), the `loop` variable, macros, and the operators as Python computes them.
// Filters, tests and methods: jinja_builtins.cpp.
#include <fmt/format.h>

#include <cmath>
#include <map>

#include "jinja_builtins.h"
#include "lf/common/error.h"
#include "lf/data/jinja.h"

namespace lf::jinja {
namespace {

struct LoopSignal {
  enum class Kind { kNone, kBreak, kContinue } kind = Kind::kNone;
};

class Renderer : public Evaluator {
 public:
  explicit Renderer(const nlohmann::ordered_json& context) {
    scopes_.emplace_back();
    for (auto it = context.begin(); it != context.end(); ++it) scopes_.back()[it.key()] = Value::from_json(it.value());
  }

  std::string run(const Body& body) {
    std::string out;
    LoopSignal sig;
    exec(body, out, sig);
    return out;
  }

  Value eval(const Expr& e) override {
    switch (e.kind) {
      case Expr::Kind::kLiteral: return e.literal;
      case Expr::Kind::kName: return lookup(e.name);
      case Expr::Kind::kList: {
        List l;
        for (const auto& a : e.args) l.push_back(eval(*a));
        return e.name == "tuple" ? Value::tuple(std::move(l)) : Value::new_list(std::move(l));
      }
      case Expr::Kind::kDict: {
        Dict d;
        for (const auto& [k, v] : e.kwargs) d.emplace_back(k, eval(*v));
        return Value::new_dict(std::move(d));
      }
      case Expr::Kind::kAttr: return attribute(eval(*e.args[0]), e.name);
      case Expr::Kind::kIndex: return item(eval(*e.args[0]), eval(*e.args[1]), e.line);
      case Expr::Kind::kSlice: return slice(e);
      case Expr::Kind::kCall: return call(e);
      case Expr::Kind::kFilter: return apply_filter(*this, e);
      case Expr::Kind::kTest: return Value::boolean(apply_test(*this, e) != e.negated);
      case Expr::Kind::kNot: return Value::boolean(!eval(*e.args[0]).truthy());
      case Expr::Kind::kNeg: {
        const Value v = eval(*e.args[0]);
        if (v.kind == Value::Kind::kInt) return Value::integer(-v.i);
        if (v.kind == Value::Kind::kFloat) return Value::real(-v.f);
        LF_THROW(ConfigError, "chat template line {}: bad operand type for unary -: {}", e.line, kind_name(v));
      }
      case Expr::Kind::kAnd: {
        Value a = eval(*e.args[0]);
        return a.truthy() ? eval(*e.args[1]) : a;
      }
      case Expr::Kind::kOr: {
        Value a = eval(*e.args[0]);
        return a.truthy() ? a : eval(*e.args[1]);
      }
      case Expr::Kind::kCond:
        if (eval(*e.args[0]).truthy()) return eval(*e.args[1]);
        return e.args.size() > 2 ? eval(*e.args[2]) : Value::undefined("");
      case Expr::Kind::kBinary: return binary(e.name, eval(*e.args[0]), eval(*e.args[1]), e.line);
    }
    return Value();
  }

  Value call_macro(const Value& m, std::vector<Value> args, const std::vector<std::pair<std::string, Value>>& kwargs) override {
    const Node& n = *m.macro->node;
    std::map<std::string, Value> frame;
    for (size_t k = 0; k < n.params.size(); ++k) {
      const auto& [name, def] = n.params[k];
      if (k < args.size()) frame[name] = args[k];
      else if (def) frame[name] = eval(*def);
      else frame[name] = Value::undefined(name);
    }
    for (const auto& [name, v] : kwargs) frame[name] = v;
    scopes_.push_back(std::move(frame));
    std::string out;
    LoopSignal sig;
    exec(n.body, out, sig);
    scopes_.pop_back();
    return Value::string(std::move(out));
  }

 private:
  Value lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
      if (auto f = it->find(name); f != it->end()) return f->second;
    if (is_global(name)) return Value::string("<builtin " + name + ">");  // `strftime_now is defined`
    return Value::undefined(name);
  }

  Value slice(const Expr& e) {
    const Value v = eval(*e.args[0]);
    auto bound = [&](int k) -> std::optional<int64_t> {
      if (!e.args[k]) return std::nullopt;
      const Value b = eval(*e.args[k]);
      if (b.kind == Value::Kind::kNone) return std::nullopt;
      LF_CHECK(b.kind == Value::Kind::kInt, ConfigError, "chat template line {}: slice indices must be integers", e.line);
      return b.i;
    };
    return slice_value(v, bound(1), bound(2), bound(3), e.line);
  }

  Value call(const Expr& e) {
    std::vector<Value> args;
    for (size_t k = 1; k < e.args.size(); ++k) args.push_back(eval(*e.args[k]));
    std::vector<std::pair<std::string, Value>> kwargs;
    for (const auto& [k, v] : e.kwargs) kwargs.emplace_back(k, eval(*v));
    const Expr& callee = *e.args[0];
    if (callee.kind == Expr::Kind::kAttr) {  // a method of a value: "a".strip(), d.items(), l.append(x)
      const Value self = eval(*callee.args[0]);
      if (self.kind == Value::Kind::kDict && self.is_namespace) {
        const Value* f = self.find(callee.name);
        if (f && f->kind == Value::Kind::kMacro) return call_macro(*f, std::move(args), kwargs);
      }
      return call_method(self, callee.name, args, kwargs, e.line);
    }
    if (callee.kind == Expr::Kind::kName) {
      const Value f = lookup(callee.name);
      if (f.kind == Value::Kind::kMacro) return call_macro(f, std::move(args), kwargs);
      if (is_global(callee.name)) return call_global(callee.name, args, kwargs, e.line);
      LF_THROW(ConfigError, "chat template line {}: `{}` is not a function the renderer knows", e.line, callee.name);
    }
    LF_THROW(ConfigError, "chat template line {}: this call is outside the Jinja subset lf-train renders", e.line);
  }

  void exec(const Body& body, std::string& out, LoopSignal& sig) {
    for (const auto& n : body) {
      exec_node(*n, out, sig);
      if (sig.kind != LoopSignal::Kind::kNone) return;
    }
  }

  void exec_node(const Node& n, std::string& out, LoopSignal& sig) {
    switch (n.kind) {
      case Node::Kind::kText: out += n.text; return;
      case Node::Kind::kOutput: out += str(eval(*n.expr)); return;
      case Node::Kind::kIf:
        for (const auto& [cond, body] : n.branches)
          if (!cond || eval(*cond).truthy()) return exec(body, out, sig);
        return;
      case Node::Kind::kFor: return exec_for(n, out, sig);
      case Node::Kind::kSet: return assign(n, eval(*n.expr));
      case Node::Kind::kSetBlock: {
        std::string inner;
        LoopSignal s2;
        exec(n.body, inner, s2);
        scopes_.back()[n.targets[0]] = Value::string(std::move(inner));
        return;
      }
      case Node::Kind::kMacro: {
        Value m;
        m.kind = Value::Kind::kMacro;
        auto mac = std::make_shared<Macro>();
        mac->node = &n;
        m.macro = mac;
        scopes_.back()[n.targets[0]] = m;
        return;
      }
      case Node::Kind::kBreak: sig.kind = LoopSignal::Kind::kBreak; return;
      case Node::Kind::kContinue: sig.kind = LoopSignal::Kind::kContinue; return;
      case Node::Kind::kBlock: return exec(n.body, out, sig);
    }
  }

  void assign(const Node& n, Value v) {
    if (n.targets.size() == 1) {
      scopes_.back()[n.targets[0]] = std::move(v);
      return;
    }
    const Value ns = lookup(n.targets[0]);
    LF_CHECK(ns.kind == Value::Kind::kDict && ns.is_namespace, ConfigError,
             "chat template line {}: `set {}.{}`: {} is not a namespace", n.line, n.targets[0], n.targets[1], n.targets[0]);
    for (auto& [k, x] : *ns.dict)
      if (k == n.targets[1]) {
        x = std::move(v);
        return;
      }
    ns.dict->emplace_back(n.targets[1], std::move(v));
  }

  void exec_for(const Node& n, std::string& out, LoopSignal& outer) {
    std::vector<Value> items = iterate(eval(*n.expr), n.line);
    std::vector<Value> kept;
    auto bind = [&](std::map<std::string, Value>& frame, const Value& item) {
      if (n.targets.size() == 1) {
        frame[n.targets[0]] = item;
        return;
      }
      std::vector<Value> parts = iterate(item, n.line);
      LF_CHECK(parts.size() == n.targets.size(), ConfigError, "chat template line {}: cannot unpack {} values into {}",
               n.line, parts.size(), n.targets.size());
      for (size_t k = 0; k < parts.size(); ++k) frame[n.targets[k]] = parts[k];
    };
    if (n.filter) {
      for (const auto& item : items) {
        scopes_.emplace_back();
        bind(scopes_.back(), item);
        const bool keep = eval(*n.filter).truthy();
        scopes_.pop_back();
        if (keep) kept.push_back(item);
      }
    } else {
      kept = std::move(items);
    }
    if (kept.empty()) {
      LoopSignal s2;
      exec(n.else_body, out, s2);
      return;
    }
    const int64_t len = static_cast<int64_t>(kept.size());
    for (int64_t k = 0; k < len; ++k) {
      scopes_.emplace_back();
      auto& frame = scopes_.back();
      Dict loop = {{"index0", Value::integer(k)},
                   {"index", Value::integer(k + 1)},
                   {"revindex0", Value::integer(len - k - 1)},
                   {"revindex", Value::integer(len - k)},
                   {"first", Value::boolean(k == 0)},
                   {"last", Value::boolean(k == len - 1)},
                   {"length", Value::integer(len)},
                   {"previtem", k > 0 ? kept[k - 1] : Value::undefined("previtem")},
                   {"nextitem", k + 1 < len ? kept[k + 1] : Value::undefined("nextitem")}};
      frame["loop"] = Value::new_dict(std::move(loop));
      bind(frame, kept[k]);
      LoopSignal sig;
      exec(n.body, out, sig);
      scopes_.pop_back();
      if (sig.kind == LoopSignal::Kind::kBreak) break;
    }
    (void)outer;
  }

  std::vector<std::map<std::string, Value>> scopes_;
};

}  // namespace

std::string render_program(const Program& p, const nlohmann::ordered_json& context) {
  return Renderer(context).run(p.body);
}

Template::Template(std::string_view source) : program_(std::make_unique<Program>(parse_program(source))) {}
Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::render(const nlohmann::ordered_json& context) const { return render_program(*program_, context); }

}  // namespace lf::jinja
