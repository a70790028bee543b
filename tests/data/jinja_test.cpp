// The Jinja renderer against transformers' own chat-template environment, and parse_template against
// LLaMA-Factory 0.9.5's (scripts/fixtures/make_jinja_reference.py made both fixtures in the reference venv).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "data_test_util.h"
#include "lf/common/error.h"
#include "lf/data/chat_template.h"
#include "lf/data/jinja.h"

namespace lf {
namespace {

using nlohmann::ordered_json;

ordered_json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  EXPECT_TRUE(in.good()) << p << ": run scripts/fixtures/make_jinja_reference.py";
  return ordered_json::parse(in);
}

TEST(Jinja, EveryTemplateRendersAsTransformersRendersIt) {
  const ordered_json ref = read_json(test::fixtures_dir() / "data" / "jinja_reference.json");
  std::map<std::string, jinja::Template> parsed;
  int cases = 0, failures = 0;
  for (const auto& c : ref["cases"]) {
    const std::string name = c["t"];
    if (!parsed.count(name)) parsed.emplace(name, jinja::Template(ref["templates"][name].get<std::string>()));
    ordered_json ctx = {{"messages", ref["conversations"][c["c"].get<int>()]},
                        {"add_generation_prompt", c["g"]},
                        {"tools", c["tools"].get<bool>() ? ref["tools"] : ordered_json(nullptr)},
                        {"documents", nullptr},
                        {"date_string", ref["date_string"]}};
    for (const auto& [k, v] : ref["specials"].items()) ctx[k] = v;
    ++cases;
    if (c.contains("error")) {
      EXPECT_THROW(parsed.at(name).render(ctx), ConfigError) << name << " conversation " << c["c"];
      continue;
    }
    std::string got;
    try {
      got = parsed.at(name).render(ctx);
    } catch (const std::exception& e) {
      got = std::string("threw: ") + e.what();
    }
    if (got != c["rendered"].get<std::string>() && ++failures <= 5)
      ADD_FAILURE() << name << " conversation " << c["c"] << " add_generation_prompt " << c["g"] << "\nwant: "
                    << c["rendered"].get<std::string>() << "\ngot:  " << got;
  }
  EXPECT_EQ(failures, 0) << "of " << cases;
  EXPECT_GT(cases, 1000);
  EXPECT_GT(parsed.size(), 100u);  // LLaMA-Factory's templates, the real tokenizers', the fixtures'
}

TEST(Jinja, OutsideTheSubsetIsAClearErrorWithTheLine) {
  try {
    jinja::Template t("a\n{% filter upper %}x{% endfilter %}");
    FAIL() << "parsed";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("filter"), std::string::npos) << e.what();
  }
  jinja::Template raising("{{ raise_exception('roles must alternate') }}");
  try {
    raising.render(ordered_json::object());
    FAIL() << "rendered";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("roles must alternate"), std::string::npos) << e.what();
  }
  EXPECT_THROW(jinja::Template("{{ x | no_such_filter }}").render({{"x", 1}}), ConfigError);
  EXPECT_THROW(jinja::Template("{% if x %}open").render({{"x", 1}}), ConfigError);
  EXPECT_THROW(jinja::Template("{{ m.append(1) }}").render({{"m", ordered_json::array()}}), ConfigError);
}

std::string slot_text(const Slots& slots) {
  std::string out;
  for (const auto& s : slots) out += s.text;
  return out;
}

TEST(ParseTemplate, MatchesLlamaFactorysParseTemplate) {
  const ordered_json templates = read_json(test::fixtures_dir() / "data" / "jinja_reference.json")["templates"];
  std::ifstream in(test::fixtures_dir() / "data" / "parse_template_reference.jsonl");
  ASSERT_TRUE(in.good());
  int checked = 0;
  for (std::string line; std::getline(in, line);) {
    const auto ref = ordered_json::parse(line);
    const std::string base = ref["tokenizer"], name = ref["template"];
    std::optional<Tokenizer> owned;
    const Tokenizer* tok = nullptr;
    if (base == "qwen3_tiny") {
      owned = Tokenizer::load(test::fixtures_dir() / "train" / "e2e" / "models" / "qwen3_tiny", TokenizerFlavor::kTransformers);
      tok = &*owned;
    } else {
      if (!test::have_assets()) continue;
      tok = &test::data_tokenizer(base);
    }
    SCOPED_TRACE(base + " x " + name);
    if (ref.contains("error")) {
      EXPECT_THROW(parse_template(*tok, templates[name]), ConfigError);
      ++checked;
      continue;
    }
    const TemplateSpec t = parse_template(*tok, templates[name]);
    EXPECT_EQ(slot_text(t.format_user), ref["user"].get<std::string>());
    EXPECT_EQ(slot_text(t.format_assistant), ref["assistant"].get<std::string>());
    EXPECT_EQ(slot_text(t.format_system), ref["system"].get<std::string>());
    EXPECT_EQ(slot_text(t.format_prefix), ref["prefix"].get<std::string>());
    EXPECT_EQ(t.default_system, ref["default_system"].get<std::string>());
    EXPECT_EQ(t.kind == TemplateKind::kReasoning, ref["reasoning"].get<bool>());
    ++checked;
  }
  EXPECT_GT(checked, 10);
}

}  // namespace
}  // namespace lf
