// Jinja source -> Program (jinja_ast.h): tags and text with the whitespace rules of transformers'
// chat-template environment (trim_blocks, lstrip_blocks, `-` / `+` modifiers), then each tag's
// expression by recursive descent in Jinja2's precedence (parser.py: or < and < not < compare <
// + - < ~ < * / // % < ** < unary < postfix, filters and tests).
#include <fmt/format.h>

#include <cctype>
#include <set>

#include "jinja_ast.h"
#include "lf/common/error.h"

namespace lf::jinja {
namespace {

bool space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// ---- expression tokens

struct Token {
  enum class Kind { kName, kString, kInt, kFloat, kOp, kEnd } kind;
  std::string text;
};

std::vector<Token> lex(const std::string& s, int line) {
  static const char* kOps[] = {"==", "!=", "<=", ">=", "//", "**", "(", ")", "[", "]", "{", "}", ",", ".", ":",
                               "|",  "+",  "-",  "*",  "/",  "%",  "~", "<", ">", "="};
  std::vector<Token> out;
  size_t k = 0;
  while (k < s.size()) {
    const char c = s[k];
    if (space(c)) { ++k; continue; }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t e = k;
      while (e < s.size() && (std::isalnum(static_cast<unsigned char>(s[e])) || s[e] == '_')) ++e;
      out.push_back({Token::Kind::kName, s.substr(k, e - k)});
      k = e;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t e = k;
      bool real = false;
      while (e < s.size() && (std::isdigit(static_cast<unsigned char>(s[e])) || s[e] == '_' ||
                              (s[e] == '.' && !real && e + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[e + 1]))))) {
        real |= s[e] == '.';
        ++e;
      }
      std::string digits;
      for (size_t q = k; q < e; ++q) if (s[q] != '_') digits += s[q];
      out.push_back({real ? Token::Kind::kFloat : Token::Kind::kInt, digits});
      k = e;
    } else if (c == '\'' || c == '"') {
      std::string v;
      size_t e = k + 1;
      for (; e < s.size() && s[e] != c; ++e) {
        if (s[e] != '\\' || e + 1 >= s.size()) { v += s[e]; continue; }
        const char n = s[++e];
        v += n == 'n' ? '\n' : n == 't' ? '\t' : n == 'r' ? '\r' : n == '0' ? '\0' : n;
        if (n != 'n' && n != 't' && n != 'r' && n != '0' && n != '\\' && n != '\'' && n != '"') v.insert(v.size() - 1, "\\");
      }
      LF_CHECK(e < s.size(), ConfigError, "chat template line {}: unterminated string", line);
      out.push_back({Token::Kind::kString, v});
      k = e + 1;
    } else {
      bool found = false;
      for (const char* op : kOps) {
        const size_t n = std::char_traits<char>::length(op);
        if (s.compare(k, n, op) == 0) {
          out.push_back({Token::Kind::kOp, op});
          k += n;
          found = true;
          break;
        }
      }
      LF_CHECK(found, ConfigError, "chat template line {}: unexpected character '{}' in `{}`", line, c, s);
    }
  }
  out.push_back({Token::Kind::kEnd, ""});
  return out;
}

// ---- expressions

class ExprParser {
 public:
  ExprParser(const std::string& text, int line) : toks_(lex(text, line)), line_(line), text_(text) {}

  ExprPtr expression() { return conditional(); }
  bool at_end() const { return peek().kind == Token::Kind::kEnd; }
  bool is_name(const char* n, size_t ahead = 0) const {
    const Token& t = peek(ahead);
    return t.kind == Token::Kind::kName && t.text == n;
  }
  bool is_op(const char* o) const { return peek().kind == Token::Kind::kOp && peek().text == o; }
  std::string name() {
    LF_CHECK(peek().kind == Token::Kind::kName, ConfigError, "chat template line {}: expected a name in `{}`", line_, text_);
    return toks_[pos_++].text;
  }
  void expect_op(const char* o) {
    LF_CHECK(is_op(o), ConfigError, "chat template line {}: expected '{}' in `{}`, found '{}'", line_, o, text_, peek().text);
    ++pos_;
  }
  void expect_name(const char* n) {
    LF_CHECK(is_name(n), ConfigError, "chat template line {}: expected '{}' in `{}`", line_, n, text_);
    ++pos_;
  }
  void expect_end() {
    LF_CHECK(at_end(), ConfigError, "chat template line {}: unexpected '{}' in `{}`", line_, peek().text, text_);
  }
  ExprPtr or_expr() {
    auto left = and_expr();
    while (is_name("or")) { ++pos_; left = binary(Expr::Kind::kOr, "or", std::move(left), and_expr()); }
    return left;
  }

 private:
  const Token& peek(size_t ahead = 0) const { return toks_[std::min(pos_ + ahead, toks_.size() - 1)]; }
  ExprPtr node(Expr::Kind k, std::string n = "") {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->name = std::move(n);
    e->line = line_;
    return e;
  }
  ExprPtr binary(Expr::Kind k, std::string op, ExprPtr a, ExprPtr b) {
    auto e = node(k, std::move(op));
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  ExprPtr conditional() {
    auto value = or_expr();
    if (!is_name("if")) return value;
    ++pos_;
    auto e = node(Expr::Kind::kCond);
    e->args.push_back(or_expr());
    e->args.push_back(std::move(value));
    if (is_name("else")) {
      ++pos_;
      e->args.push_back(conditional());
    }
    return e;
  }
  ExprPtr and_expr() {
    auto left = not_expr();
    while (is_name("and")) { ++pos_; left = binary(Expr::Kind::kAnd, "and", std::move(left), not_expr()); }
    return left;
  }
  ExprPtr not_expr() {
    if (!is_name("not")) return compare();
    ++pos_;
    auto e = node(Expr::Kind::kNot);
    e->args.push_back(not_expr());
    return e;
  }
  ExprPtr compare() {
    auto left = math1();
    while (true) {
      std::string op;
      if (peek().kind == Token::Kind::kOp && (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
                                              peek().text == ">" || peek().text == "<=" || peek().text == ">=")) {
        op = toks_[pos_++].text;
      } else if (is_name("in")) {
        ++pos_;
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        pos_ += 2;
        op = "not in";
      } else {
        return left;
      }
      left = binary(Expr::Kind::kBinary, op, std::move(left), math1());
    }
  }
  ExprPtr math1() {
    auto left = concat();
    while (is_op("+") || is_op("-")) {
      const std::string op = toks_[pos_++].text;
      left = binary(Expr::Kind::kBinary, op, std::move(left), concat());
    }
    return left;
  }
  ExprPtr concat() {
    auto left = math2();
    while (is_op("~")) { ++pos_; left = binary(Expr::Kind::kBinary, "~", std::move(left), math2()); }
    return left;
  }
  ExprPtr math2() {
    auto left = power();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const std::string op = toks_[pos_++].text;
      left = binary(Expr::Kind::kBinary, op, std::move(left), power());
    }
    return left;
  }
  ExprPtr power() {
    auto left = unary(true);
    while (is_op("**")) { ++pos_; left = binary(Expr::Kind::kBinary, "**", std::move(left), unary(true)); }
    return left;
  }
  ExprPtr unary(bool with_filter) {
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const bool neg = is_op("-");
      ++pos_;
      auto operand = unary(false);
      if (neg) {
        e = node(Expr::Kind::kNeg);
        e->args.push_back(std::move(operand));
      } else {
        e = std::move(operand);
      }
    } else {
      e = postfix(primary());
    }
    if (with_filter) return filters(std::move(e));
    return e;
  }
  ExprPtr primary() {
    const Token t = peek();
    ++pos_;
    switch (t.kind) {
      case Token::Kind::kString: {
        std::string v = t.text;
        while (peek().kind == Token::Kind::kString) v += toks_[pos_++].text;  // adjacent literals join
        auto e = node(Expr::Kind::kLiteral);
        e->literal = Value::string(std::move(v));
        return e;
      }
      case Token::Kind::kInt:
      case Token::Kind::kFloat: {
        auto e = node(Expr::Kind::kLiteral);
        e->literal = t.kind == Token::Kind::kInt ? Value::integer(std::stoll(t.text)) : Value::real(std::stod(t.text));
        return e;
      }
      case Token::Kind::kName: {
        auto e = node(Expr::Kind::kLiteral);
        if (t.text == "true" || t.text == "True") e->literal = Value::boolean(true);
        else if (t.text == "false" || t.text == "False") e->literal = Value::boolean(false);
        else if (t.text == "none" || t.text == "None") e->literal = Value::none();
        else return node(Expr::Kind::kName, t.text);
        return e;
      }
      case Token::Kind::kOp:
        if (t.text == "(") {
          auto inner = expression();
          if (is_op(",")) {  // a tuple: Python lists and tuples behave alike in templates
            auto list = node(Expr::Kind::kList);
            list->args.push_back(std::move(inner));
            while (is_op(",")) {
              ++pos_;
              if (is_op(")")) break;
              list->args.push_back(expression());
            }
            list->name = "tuple";
            inner = std::move(list);
          }
          expect_op(")");
          return inner;
        }
        if (t.text == "[") {
          auto list = node(Expr::Kind::kList);
          while (!is_op("]")) {
            list->args.push_back(expression());
            if (!is_op(",")) break;
            ++pos_;
          }
          expect_op("]");
          return list;
        }
        if (t.text == "{") {
          auto dict = node(Expr::Kind::kDict);
          while (!is_op("}")) {
            auto key = expression();
            expect_op(":");
            LF_CHECK(key->kind == Expr::Kind::kLiteral && key->literal.kind == Value::Kind::kString, ConfigError,
                     "chat template line {}: only string keys are supported in dict literals (`{}`)", line_, text_);
            dict->kwargs.emplace_back(key->literal.s, expression());
            if (!is_op(",")) break;
            ++pos_;
          }
          expect_op("}");
          return dict;
        }
        [[fallthrough]];
      default:
        LF_THROW(ConfigError, "chat template line {}: unexpected '{}' in `{}`", line_, t.text, text_);
    }
  }
  void call_args(Expr& e) {
    expect_op("(");
    while (!is_op(")")) {
      if (peek().kind == Token::Kind::kName && peek(1).kind == Token::Kind::kOp && peek(1).text == "=") {
        std::string key = toks_[pos_].text;
        pos_ += 2;
        e.kwargs.emplace_back(std::move(key), expression());
      } else {
        e.args.push_back(expression());
      }
      if (!is_op(",")) break;
      ++pos_;
    }
    expect_op(")");
  }
  ExprPtr postfix(ExprPtr e) {
    while (true) {
      if (is_op(".")) {
        ++pos_;
        const Token t = peek();
        ++pos_;
        LF_CHECK(t.kind == Token::Kind::kName || t.kind == Token::Kind::kInt, ConfigError,
                 "chat template line {}: expected an attribute after '.' in `{}`", line_, text_);
        auto a = node(t.kind == Token::Kind::kInt ? Expr::Kind::kIndex : Expr::Kind::kAttr, t.text);
        a->args.push_back(std::move(e));
        if (t.kind == Token::Kind::kInt) {
          auto idx = node(Expr::Kind::kLiteral);
          idx->literal = Value::integer(std::stoll(t.text));
          a->args.push_back(std::move(idx));
        }
        e = std::move(a);
      } else if (is_op("[")) {
        ++pos_;
        ExprPtr parts[3];
        int colons = 0;
        while (!is_op("]")) {
          if (is_op(":")) {
            ++pos_;
            LF_CHECK(++colons <= 2, ConfigError, "chat template line {}: bad slice in `{}`", line_, text_);
          } else {
            parts[colons] = expression();
          }
        }
        expect_op("]");
        auto a = node(colons ? Expr::Kind::kSlice : Expr::Kind::kIndex);
        a->args.push_back(std::move(e));
        for (int k = 0; k < (colons ? 3 : 1); ++k) a->args.push_back(std::move(parts[k]));
        e = std::move(a);
      } else if (is_op("(")) {
        auto c = node(Expr::Kind::kCall);
        c->args.push_back(std::move(e));
        call_args(*c);
        e = std::move(c);
      } else {
        return e;
      }
    }
  }
  ExprPtr filters(ExprPtr e) {
    while (true) {
      if (is_op("|")) {
        ++pos_;
        auto f = node(Expr::Kind::kFilter, name());
        f->args.push_back(std::move(e));
        if (is_op("(")) call_args(*f);
        e = std::move(f);
      } else if (is_name("is")) {
        ++pos_;
        auto t = node(Expr::Kind::kTest);
        if (is_name("not")) {
          ++pos_;
          t->negated = true;
        }
        t->name = name();
        t->args.push_back(std::move(e));
        if (is_op("(")) {
          call_args(*t);
        } else if (peek().kind == Token::Kind::kString || peek().kind == Token::Kind::kInt ||
                   peek().kind == Token::Kind::kFloat ||
                   (peek().kind == Token::Kind::kName && !is_name("else") && !is_name("and") && !is_name("or") &&
                    !is_name("if") && !is_name("in") && !is_name("is") && !is_name("not"))) {
          t->args.push_back(postfix(primary()));
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int line_;
  std::string text_;
};

// ---- statements

class StmtParser {
 public:
  explicit StmtParser(std::vector<Segment> segs) : segs_(std::move(segs)) {}

  Body parse_all() {
    std::string end;
    Body b = body({}, end);
    return b;
  }

 private:
  static std::string keyword(const Segment& s) {
    size_t k = 0;
    while (k < s.text.size() && space(s.text[k])) ++k;
    size_t e = k;
    while (e < s.text.size() && (std::isalnum(static_cast<unsigned char>(s.text[e])) || s.text[e] == '_')) ++e;
    return s.text.substr(k, e - k);
  }
  static std::unique_ptr<Node> node(Node::Kind k, int line) {
    auto n = std::make_unique<Node>();
    n->kind = k;
    n->line = line;
    return n;
  }

  // Nodes up to a statement whose keyword is in `ends` (consumed; its segment in `end_seg_`).
  Body body(const std::set<std::string>& ends, std::string& end) {
    Body out;
    while (pos_ < segs_.size()) {
      const Segment& s = segs_[pos_++];
      if (s.kind == Segment::Kind::kText) {
        auto n = node(Node::Kind::kText, s.line);
        n->text = s.text;
        out.push_back(std::move(n));
        continue;
      }
      if (s.kind == Segment::Kind::kExpr) {
        ExprParser p(s.text, s.line);
        auto n = node(Node::Kind::kOutput, s.line);
        n->expr = p.expression();
        p.expect_end();
        out.push_back(std::move(n));
        continue;
      }
      const std::string kw = keyword(s);
      if (ends.count(kw)) {
        end = kw;
        end_seg_ = &s;
        return out;
      }
      out.push_back(statement(s, kw));
    }
    LF_CHECK(ends.empty(), ConfigError, "chat template: a block is not closed (expected one of {} before the end)",
             fmt::join(ends, ", "));
    return out;
  }

  std::unique_ptr<Node> statement(const Segment& s, const std::string& kw) {
    ExprParser p(s.text, s.line);
    p.expect_name(kw.c_str());
    if (kw == "if") return parse_if(s, p);
    if (kw == "for") return parse_for(s, p);
    if (kw == "set") return parse_set(s, p);
    if (kw == "macro") return parse_macro(s, p);
    std::string end;
    if (kw == "break" || kw == "continue") {
      p.expect_end();
      return node(kw == "break" ? Node::Kind::kBreak : Node::Kind::kContinue, s.line);
    }
    if (kw == "generation") {  // transformers' assistant-mask marker: renders its body
      p.expect_end();
      auto n = node(Node::Kind::kBlock, s.line);
      n->body = body({"endgeneration"}, end);
      return n;
    }
    LF_THROW(ConfigError,
             "chat template line {}: `{{% {} %}}` is outside the Jinja subset lf-train renders (if, for, set, macro, "
             "break, continue, generation); set `template:` to a LLaMA-Factory template name instead",
             s.line, kw);
  }

  std::unique_ptr<Node> parse_if(const Segment& s, ExprParser& p) {
    auto n = node(Node::Kind::kIf, s.line);
    ExprPtr cond = p.expression();
    p.expect_end();
    std::string end;
    while (true) {
      Body b = body({"elif", "else", "endif"}, end);
      n->branches.emplace_back(std::move(cond), std::move(b));
      if (end == "endif") break;
      ExprParser q(end_seg_->text, end_seg_->line);
      q.expect_name(end.c_str());
      cond = end == "elif" ? q.expression() : nullptr;
      q.expect_end();
      if (end == "else") {
        n->branches.emplace_back(nullptr, body({"endif"}, end));
        break;
      }
    }
    return n;
  }

  std::unique_ptr<Node> parse_for(const Segment& s, ExprParser& p) {
    auto n = node(Node::Kind::kFor, s.line);
    n->targets.push_back(p.name());
    while (p.is_op(",")) {
      p.expect_op(",");
      n->targets.push_back(p.name());
    }
    p.expect_name("in");
    n->expr = p.or_expr();
    if (p.is_name("if")) {
      p.expect_name("if");
      n->filter = p.or_expr();
    }
    LF_CHECK(!p.is_name("recursive"), ConfigError, "chat template line {}: recursive loops are not supported", s.line);
    p.expect_end();
    std::string end;
    n->body = body({"else", "endfor"}, end);
    if (end == "else") n->else_body = body({"endfor"}, end);
    return n;
  }

  std::unique_ptr<Node> parse_set(const Segment& s, ExprParser& p) {
    std::string target = p.name();
    std::string attr;
    if (p.is_op(".")) {
      p.expect_op(".");
      attr = p.name();
    }
    if (!p.is_op("=")) {  // {% set x %}...{% endset %}
      p.expect_end();
      auto n = node(Node::Kind::kSetBlock, s.line);
      n->targets = {target};
      std::string end;
      n->body = body({"endset"}, end);
      return n;
    }
    p.expect_op("=");
    auto n = node(Node::Kind::kSet, s.line);
    n->targets = attr.empty() ? std::vector<std::string>{target} : std::vector<std::string>{target, attr};
    n->expr = p.expression();
    p.expect_end();
    return n;
  }

  std::unique_ptr<Node> parse_macro(const Segment& s, ExprParser& p) {
    auto n = node(Node::Kind::kMacro, s.line);
    n->targets = {p.name()};
    p.expect_op("(");
    while (!p.is_op(")")) {
      std::string param = p.name();
      ExprPtr def;
      if (p.is_op("=")) {
        p.expect_op("=");
        def = p.expression();
      }
      n->params.emplace_back(std::move(param), std::move(def));
      if (!p.is_op(",")) break;
      p.expect_op(",");
    }
    p.expect_op(")");
    p.expect_end();
    std::string end;
    n->body = body({"endmacro"}, end);
    return n;
  }

  std::vector<Segment> segs_;
  size_t pos_ = 0;
  const Segment* end_seg_ = nullptr;
};

}  // namespace

Program parse_program(std::string_view source) {
  // Jinja's lexer: newlines normalised to "\n", one trailing newline dropped (keep_trailing_newline=False).
  std::string text;
  for (size_t k = 0; k < source.size(); ++k) {
    if (source[k] == '\r') {
      text += '\n';
      if (k + 1 < source.size() && source[k + 1] == '\n') ++k;
    } else {
      text += source[k];
    }
  }
  if (!text.empty() && text.back() == '\n') text.pop_back();
  Program p;
  p.body = StmtParser(segments(text)).parse_all();
  return p;
}

}  // namespace lf::jinja
