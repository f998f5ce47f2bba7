// Constrained decoding, against independent oracles:
//   * the automaton vs a set-of-end-positions recognizer written straight from the grammar's
//     alternatives (no stacks, no determinization), on derived sentences and their mutations;
//   * character classes vs the code point sets they name (all of U+0000..U+FFFF, samples above);
//   * integer ranges vs arithmetic; schema outputs vs nlohmann's parser and the schema's rules;
//   * token masks (trie walk, cache, budget) vs walking every token's bytes one at a time;
//   * sampling with random logits: every reply is complete valid JSON within its max_tokens.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "engine/sampler.h"
#include "tiny/tiny_tokenizer.h"
#include "grammar/automaton.h"
#include "grammar/constraint.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/token_masker.h"
#include "grammar/tool_grammar.h"
#include "chat/output_parser.h"
#include "tokenizer/tokenizer.h"

namespace mmx::grammar {
namespace {

// ---- the reference recognizer: ends(rule, i) = every j such that rule derives s[i, j) ----
class Reference {
 public:
  Reference(const Grammar& g, std::string_view s) : g_(g), s_(s) {}
  bool accepts() { return ends(g_.root, 0).count(s_.size()) > 0; }

 private:
  const std::set<size_t>& ends(uint32_t r, size_t i) {
    const auto key = std::make_pair(r, i);
    if (const auto it = memo_.find(key); it != memo_.end()) return it->second;
    std::set<size_t> out;
    for (uint32_t a : g_.alts[r]) {
      std::set<size_t> cur{i};
      for (uint32_t p = a; g_.elems[p].kind != Element::kEnd && !cur.empty(); ++p) {
        std::set<size_t> nxt;
        const Element e = g_.elems[p];
        for (size_t q : cur) {
          if (e.kind == Element::kBytes) {
            if (q < s_.size() && g_.classes[e.arg].test(uint8_t(s_[q]))) nxt.insert(q + 1);
          } else {
            const auto& sub = ends(e.arg, q);
            nxt.insert(sub.begin(), sub.end());
          }
        }
        cur = std::move(nxt);
      }
      out.insert(cur.begin(), cur.end());
    }
    return memo_[key] = std::move(out);
  }
  const Grammar& g_;
  std::string_view s_;
  std::map<std::pair<uint32_t, size_t>, std::set<size_t>> memo_;
};

bool automaton_accepts(Automaton& a, std::string_view s) {
  const int32_t st = a.walk(a.start(), s);
  return st != Automaton::kDead && a.accepting(st);
}

// A random sentence: random alternatives, the shortest ones once deep.
std::string derive(const Grammar& g, std::mt19937& rng, uint32_t r, int depth = 0) {
  const auto& alts = g.alts[r];
  uint32_t pick = alts[rng() % alts.size()];
  if (depth > 12)
    for (uint32_t a : alts)
      if (g.min_rest[a] < g.min_rest[pick]) pick = a;
  std::string out;
  for (uint32_t p = pick; g.elems[p].kind != Element::kEnd; ++p) {
    const Element e = g.elems[p];
    if (e.kind == Element::kRef) {
      out += derive(g, rng, e.arg, depth + 1);
      continue;
    }
    std::vector<int> bytes;
    for (int b = 0; b < 256; ++b)
      if (g.classes[e.arg].test(size_t(b))) bytes.push_back(b);
    out += char(bytes[rng() % bytes.size()]);
  }
  return out;
}

void expect_same_language(const std::string& gbnf, int n_sentences, uint32_t seed) {
  SCOPED_TRACE(gbnf);
  const Grammar g = parse_gbnf(gbnf);
  Automaton a(g);
  std::mt19937 rng(seed);
  int accepted = 0, rejected = 0;
  for (int i = 0; i < n_sentences; ++i) {
    std::string s = derive(g, rng, g.root);
    std::vector<std::string> cases{s};
    if (!s.empty()) {
      std::string m = s;
      m[rng() % m.size()] = char(rng() % 128);
      cases.push_back(m);
      cases.push_back(s.substr(0, rng() % s.size()));
      cases.push_back(s + char(rng() % 128));
    }
    for (const std::string& c : cases) {
      const bool ref = Reference(g, c).accepts();
      ASSERT_EQ(automaton_accepts(a, c), ref) << "on '" << c << "'";
      (ref ? accepted : rejected)++;
    }
    ASSERT_TRUE(Reference(g, s).accepts()) << "a derived sentence is in the language: " << s;
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(rejected, 0);
}

TEST(Grammar, AutomatonMatchesReference) {
  expect_same_language(R"g(root ::= expr
expr ::= term (("+" | "-") term)*
term ::= factor (("*" | "/") factor)*
factor ::= [0-9]+ | "(" expr ")" | "-" factor)g", 300, 1);
  expect_same_language(R"g(root ::= "a"{2,4} "b"? ([xyz] | "é"){0,3} tail
tail ::= | "." tail)g", 300, 2);
  expect_same_language(R"g(root ::= item ("," item)*  # a comment
item ::= [^,\n]{1,3} | "\"" [^"]* "\"")g", 300, 3);
  expect_same_language(json_object_gbnf(), 200, 4);
  expect_same_language(json_schema_to_gbnf(nlohmann::json::parse(R"({"type":"object","properties":{
    "a":{"type":"integer","minimum":-5,"maximum":120},"b":{"enum":["x","y",3]},"c":{"type":"array","items":{"type":"boolean"},"minItems":1,"maxItems":3}},
    "required":["a"]})")), 200, 5);
}

TEST(Grammar, GbnfErrorsNameTheProblem) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "empty"},
      {"root ::= foo", "'foo' is used but never defined"},
      {"root ::= root \"a\" | \"b\"", "left-recursive"},
      {"root ::= x | \"z\"\nx ::= y root\ny ::= \"\" | \"q\"", "left-recursive"},
      {"root ::= \"a\" root", "can never finish"},
      {"root ::= \"abc", "unterminated"},
      {"root ::= [a-", "unterminated"},
      {"root ::= [z-a]", "backwards"},
      {"root ::= \"a\"{3,1}", "max < min"},
      {"root ::= \"a\"\nroot ::= \"b\"", "defined twice"},
      {"root ::= \"\\q\"", "unknown escape"},
      {"root ::= \"\\uD800\"", "not a character"},
      {"top ::= \"a\"", "no rule 'root'"},
      {"root ::= \"a\" )", "found ')'"},
      {"root ::= \"a\"{99999}", "above 10000"},
      {[] {
         std::string g = "root ::=";
         for (int i = 0; i < 21; ++i) g += " \"a\"{10000}";
         return g;
       }(),
       "elements"},
      {"root ::= " + std::string(70, '(') + "\"a\"" + std::string(70, ')'), "nest deeper"},
  };
  for (const auto& [text, want] : bad) {
    try {
      parse_gbnf(text);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << text << " -> " << e.what();
    }
  }
}

// An ambiguous grammar multiplies its stacks: refused with an error, never memory without bound.
TEST(Grammar, AmbiguityHasALimit) {
  // After k "(" the stacks remember which closer each level wants: 2^k of them.
  Automaton a(parse_gbnf(R"g(root ::= "(" root ")" | "(" root "]" | "")g"));
  EXPECT_THROW(
      {
        int32_t st = a.start();
        for (int i = 0; i < 64 && st != Automaton::kDead; ++i) st = a.next(st, '(');
      },
      Error);
  EXPECT_LE(a.n_nodes(), Automaton::kMaxNodes);
}

TEST(Grammar, CharClassesMatchTheirCodePoints) {
  struct Case {
    std::string gbnf;
    std::function<bool(uint32_t)> in;
  };
  const std::vector<Case> cases = {
      {"root ::= [a-zé-ÿ\\u4e00-\\u9fff]", [](uint32_t c) { return (c >= 'a' && c <= 'z') || (c >= 0xE9 && c <= 0xFF) || (c >= 0x4E00 && c <= 0x9FFF); }},
      {"root ::= [^\"\\\\\\x00-\\x1f]", [](uint32_t c) { return c != '"' && c != '\\' && c >= 0x20; }},
      {"root ::= .", [](uint32_t) { return true; }},
      {"root ::= [\\U0001F600-\\U0001F64F\\x7f-\\u0800]", [](uint32_t c) { return (c >= 0x1F600 && c <= 0x1F64F) || (c >= 0x7F && c <= 0x800); }},
  };
  std::mt19937 rng(9);
  for (const Case& k : cases) {
    Automaton a(parse_gbnf(k.gbnf));
    std::vector<uint32_t> cps;
    for (uint32_t c = 0; c < 0x10000; ++c) cps.push_back(c);
    for (int i = 0; i < 20000; ++i) cps.push_back(0x10000 + rng() % 0x100000);
    for (uint32_t c : cps) {
      if (c >= 0xD800 && c <= 0xDFFF) continue;
      ASSERT_EQ(automaton_accepts(a, utf8_encode(c)), k.in(c)) << k.gbnf << " U+" << std::hex << c;
    }
    // Never a surrogate, an overlong form or a stray continuation byte.
    for (std::string bad : {"\xED\xA0\x80", "\xC0\x80", "\xE0\x80\x80", "\x80", "\xF4\x90\x80\x80"})
      EXPECT_FALSE(automaton_accepts(a, bad)) << k.gbnf;
  }
}

TEST(Grammar, IntegerRangesMatchArithmetic) {
  std::mt19937 rng(11);
  const std::vector<std::pair<std::optional<int64_t>, std::optional<int64_t>>> ranges = {
      {0, 9}, {5, 5}, {-5, 120}, {13, 4567}, {-1000, -17}, {std::nullopt, -3}, {42, std::nullopt},
      {std::nullopt, 250}, {-7, std::nullopt}, {100, 999}, {99, 1000}, {0, 0}, {-9, -9}, {1, 1000000}};
  for (const auto& [lo, hi] : ranges) {
    nlohmann::json s = {{"type", "integer"}};
    if (lo) s["minimum"] = *lo;
    if (hi) s["maximum"] = *hi;
    SCOPED_TRACE(s.dump());
    Automaton a(parse_gbnf(json_schema_to_gbnf(s)));
    std::vector<int64_t> probe;
    for (int64_t v = -1200; v <= 1200; ++v) probe.push_back(v);
    for (int i = 0; i < 2000; ++i) probe.push_back(int64_t(rng() % 4000000) - 2000000);
    for (int64_t v : {int64_t(999999999999), int64_t(-999999999999), int64_t(1000000), int64_t(1000001)}) probe.push_back(v);
    for (int64_t v : probe) {
      const bool in = (!lo || v >= *lo) && (!hi || v <= *hi);
      ASSERT_EQ(automaton_accepts(a, std::to_string(v)), in) << v;
    }
    EXPECT_FALSE(automaton_accepts(a, "007"));
    EXPECT_FALSE(automaton_accepts(a, "-0"));
  }
}

TEST(Grammar, SchemaSentencesAreValidJson) {
  const auto schema = nlohmann::json::parse(R"({
    "$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}}, "required": ["v"], "additionalProperties": false}},
    "type": "object",
    "properties": {
      "name": {"type": "string", "minLength": 2, "maxLength": 5},
      "kind": {"enum": ["a", "b", null]},
      "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
      "score": {"type": ["number", "null"]},
      "tree": {"$ref": "#/$defs/node"},
      "opt": {"type": "boolean"},
      "any": {"anyOf": [{"type": "integer", "maximum": 3}, {"const": "k"}]}
    },
    "required": ["name", "kind", "tags", "tree", "any"],
    "additionalProperties": false})");
  const Grammar g = parse_gbnf(json_schema_to_gbnf(schema));
  Automaton a(g);
  std::mt19937 rng(21);
  std::set<bool> saw_opt;
  for (int i = 0; i < 300; ++i) {
    const std::string s = derive(g, rng, g.root);
    ASSERT_TRUE(automaton_accepts(a, s));
    nlohmann::json v;
    ASSERT_NO_THROW(v = nlohmann::json::parse(s)) << s;
    ASSERT_TRUE(v.is_object());
    for (const char* k : {"name", "kind", "tags", "tree", "any"}) ASSERT_TRUE(v.contains(k)) << s;
    for (const auto& [k, x] : v.items()) ASSERT_TRUE(schema["properties"].contains(k)) << k;
    // minLength/maxLength count code points
    const std::string name = v["name"].get<std::string>();
    size_t cps = 0;
    for (unsigned char c : name) cps += (c & 0xC0) != 0x80;
    ASSERT_GE(cps, 2u);
    ASSERT_LE(cps, 5u);
    ASSERT_TRUE(v["kind"] == "a" || v["kind"] == "b" || v["kind"].is_null());
    ASSERT_GE(v["tags"].size(), 1u);
    ASSERT_LE(v["tags"].size(), 3u);
    ASSERT_TRUE(v["any"] == "k" || (v["any"].is_number_integer() && v["any"].get<int64_t>() <= 3)) << s;
    std::function<void(const nlohmann::json&)> node = [&](const nlohmann::json& n) {
      ASSERT_TRUE(n.contains("v") && n["v"].is_number_integer());
      if (n.contains("kids")) {
        ASSERT_LE(n["kids"].size(), 2u);
        for (const auto& k : n["kids"]) node(k);
      }
    };
    node(v["tree"]);
    saw_opt.insert(v.contains("opt"));
  }
  EXPECT_EQ(saw_opt.size(), 2u) << "an optional property is sometimes written, sometimes not";
}

TEST(Grammar, UnsupportedSchemaKeywordsAreNamed) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"type":"string","pattern":"^a"})", "pattern"},
      {R"({"type":"string","format":"email"})", "format"},
      {R"({"oneOf":[{"type":"string"}]})", "oneOf"},
      {R"({"allOf":[{"type":"string"}]})", "allOf"},
      {R"({"type":"number","exclusiveMinimum":true})", "exclusiveMinimum"},
      {R"({"type":"number","minimum":2,"exclusiveMaximum":2})", "maximum"},
      {R"({"type":"object","propertyNames":{"maxLength":3}})", "propertyNames"},
      {R"({"type":"object","propertyNames":{"type":"string","pattern":"^a"}})", "propertyNames"},
      {R"({"type":"string","minLength":10001})", "minLength"},
      {R"({"type":"array","items":[{"type":"string"}]})", "items"},
      {R"({"$ref":"http://x/y"})", "$ref"},
      {R"({"$ref":"#/$defs/missing"})", "$ref"},
      {R"({"type":"wat"})", "type"},
      {R"({"type":"object","properties":{"a":{"type":"string","uniqueItems":true}}})", "uniqueItems"},
      {R"({"type":"integer","minimum":5,"maximum":4})", "maximum"},
      {R"(false)", "false"},
      // Unsatisfiable: 'a' must be there and may not (it used to give {"a": 0}).
      {R"({"properties":{},"required":["a"],"additionalProperties":false})", "required"},
  };
  for (const auto& [text, kw] : bad) {
    try {
      json_schema_to_gbnf(nlohmann::json::parse(text));
      ADD_FAILURE() << "accepted: " << text;
    } catch (const SchemaError& e) {
      EXPECT_EQ(e.keyword(), kw) << text << " -> " << e.what();
    }
  }
}

// A required name outside 'properties' is an additional property: its value follows
// additionalProperties (it used to be any JSON value).
TEST(Grammar, RequiredOutsidePropertiesFollowsAdditionalProperties) {
  const Grammar g = parse_gbnf(json_schema_to_gbnf(
      nlohmann::json::parse(R"({"type":"object","required":["a"],"additionalProperties":{"type":"integer"}})")));
  std::mt19937 rng(5);
  for (int i = 0; i < 200; ++i) {
    const std::string sentence = derive(g, rng, g.root);
    const nlohmann::json v = nlohmann::json::parse(sentence);
    ASSERT_TRUE(v.contains("a")) << sentence;
    for (const auto& [k, x] : v.items()) EXPECT_TRUE(x.is_number_integer()) << sentence;
  }
}

// Sentences of the forced tool-call grammars, read back by the real output parser (chat/), give
// calls whose arguments fit the tools' schemas.
TEST(Grammar, ForcedToolCallsParseBackValid) {
  const auto tools = nlohmann::ordered_json::parse(R"([
    {"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{
      "city":{"type":"string"},"days":{"type":"integer","minimum":1,"maximum":7},"units":{"type":"string","enum":["c","f"]},
      "opts":{"type":"object","properties":{"hourly":{"type":"boolean"},"tags":{"type":"array","items":{"type":"string"},"maxItems":2}},"required":["hourly"]}},
      "required":["city","days"]}}},
    {"type":"function","function":{"name":"noop","parameters":{"type":"object","properties":{}}}}])");
  const nlohmann::json tools_plain = nlohmann::json::parse(tools.dump());
  for (const auto format : {chat::OutputFormat::kM2, chat::OutputFormat::kM3, chat::OutputFormat::kM1}) {
    const Grammar g = parse_gbnf(format == chat::OutputFormat::kM3   ? m3_tool_call_gbnf(tools, "")
                                 : format == chat::OutputFormat::kM1 ? m1_tool_call_gbnf(tools, "")
                                                                     : m2_tool_call_gbnf(tools, ""));
    std::mt19937 rng(30 + int(format));
    int calls = 0;
    for (int i = 0; i < 300; ++i) {
      const std::string s = derive(g, rng, g.root);
      const chat::ParsedDelta d = chat::parse_full(format, s, tools_plain, /*starts_in_reasoning=*/false);
      ASSERT_FALSE(d.tool_calls.empty()) << s;
      ASSERT_TRUE(d.content.empty()) << "text outside the calls: " << d.content << " in " << s;
      for (const chat::ToolCall& c : d.tool_calls) {
        ++calls;
        const auto a = nlohmann::json::parse(c.arguments_json);
        ASSERT_TRUE(a.is_object()) << s;
        if (c.name == "noop") {
          ASSERT_TRUE(a.empty()) << s;
          continue;
        }
        ASSERT_EQ(c.name, "get_weather");
        ASSERT_TRUE(a.contains("city") && a["city"].is_string()) << c.arguments_json << "\n" << s;
        ASSERT_TRUE(a["days"].is_number_integer() && a["days"] >= 1 && a["days"] <= 7) << c.arguments_json << "\n" << s;
        if (a.contains("units")) ASSERT_TRUE(a["units"] == "c" || a["units"] == "f") << c.arguments_json;
        if (a.contains("opts")) {
          ASSERT_TRUE(a["opts"].is_object() && a["opts"]["hourly"].is_boolean()) << c.arguments_json << "\n" << s;
          if (a["opts"].contains("tags")) ASSERT_TRUE(a["opts"]["tags"].is_array() && a["opts"]["tags"].size() <= 2) << c.arguments_json;
        }
      }
    }
    EXPECT_GT(calls, 300);
  }
}

// An independent check of a JSON value against the keywords the next test uses: type (one or a
// list), properties, required, enum, const, items, minItems / maxItems, minLength / maxLength (code
// points), minimum / maximum, anyOf / oneOf (exactly one). Returns why v fails, or "".
std::string violation(const nlohmann::json& v, const nlohmann::json& s) {
  auto type_ok = [&](const std::string& t) {
    return t == "string" ? v.is_string() : t == "integer" ? v.is_number_integer() : t == "number" ? v.is_number()
         : t == "boolean" ? v.is_boolean() : t == "null" ? v.is_null() : t == "object" ? v.is_object() : t == "array" ? v.is_array() : false;
  };
  if (s.contains("type")) {
    bool ok = false;
    for (const auto& t : s["type"].is_array() ? s["type"] : nlohmann::json::array({s["type"]})) ok = ok || type_ok(t.get<std::string>());
    if (!ok) return "type " + s["type"].dump();
  }
  if (s.contains("const") && v != s["const"]) return "const";
  if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end()) return "enum";
  for (const char* kw : {"anyOf", "oneOf"})
    if (s.contains(kw)) {
      int n = 0;
      for (const auto& b : s[kw]) n += violation(v, b).empty();
      if (n == 0 || (std::string(kw) == "oneOf" && n > 1)) return kw;
    }
  if (v.is_string()) {
    int64_t cps = 0;
    for (unsigned char c : v.get<std::string>()) cps += (c & 0xC0) != 0x80;
    if (s.contains("minLength") && cps < s["minLength"].get<int64_t>()) return "minLength";
    if (s.contains("maxLength") && cps > s["maxLength"].get<int64_t>()) return "maxLength";
  }
  if (v.is_number()) {  // as JavaScript (ajv) compares: doubles
    const double x = v.get<double>();
    if (s.contains("minimum") && x < s["minimum"].get<double>()) return "minimum";
    if (s.contains("maximum") && x > s["maximum"].get<double>()) return "maximum";
    if (s.contains("exclusiveMinimum") && x <= s["exclusiveMinimum"].get<double>()) return "exclusiveMinimum";
    if (s.contains("exclusiveMaximum") && x >= s["exclusiveMaximum"].get<double>()) return "exclusiveMaximum";
  }
  if (v.is_object()) {
    for (const auto& r : s.value("required", nlohmann::json::array()))
      if (!v.contains(r.get<std::string>())) return "required " + r.get<std::string>();
    const nlohmann::json props = s.value("properties", nlohmann::json::object());
    for (const auto& [k, sub] : props.items())
      if (v.contains(k))
        if (std::string why = violation(v[k], sub); !why.empty()) return k + ": " + why;
    for (const auto& [k, x] : v.items()) {  // keys not listed: additionalProperties (propertyNames: strings, always)
      if (props.contains(k) || !s.contains("additionalProperties")) continue;
      const nlohmann::json& ap = s["additionalProperties"];
      if (ap == false) return "additional property " + k;
      if (ap.is_object())
        if (std::string why = violation(x, ap); !why.empty()) return k + " (additional): " + why;
    }
  }
  if (v.is_array()) {
    if (s.contains("minItems") && int64_t(v.size()) < s["minItems"].get<int64_t>()) return "minItems";
    if (s.contains("maxItems") && int64_t(v.size()) > s["maxItems"].get<int64_t>()) return "maxItems";
    if (s.contains("items"))
      for (const auto& x : v)
        if (std::string why = violation(x, s["items"]); !why.empty()) return "item: " + why;
  }
  return "";
}

// String lengths, string consts and X-or-null unions in forced calls, every format: derived
// calls parse back valid, and short strings next to the null words (the M2 parser reads
// "null" / "None" / "nil" as null) still come back as strings.
TEST(Grammar, ForcedToolCallsHonourLengthsAndOptionals) {
  const auto tools = nlohmann::ordered_json::parse(R"([
    {"type":"function","function":{"name":"book","parameters":{"type":"object","properties":{
      "code":{"type":"string","minLength":2,"maxLength":5},
      "word":{"type":"string","minLength":3,"maxLength":4},
      "long":{"type":"string","minLength":6},
      "kind":{"const":"fixed"},
      "note":{"anyOf":[{"type":"string","maxLength":3},{"type":"null"}]},
      "count":{"type":["integer","null"],"minimum":0,"maximum":9},
      "tags":{"type":"array","items":{"type":"string","minLength":1,"maxLength":2},"minItems":1,"maxItems":3}},
      "required":["code","word","long","kind","note","count","tags"]}}}])");
  const nlohmann::json tools_plain = nlohmann::json::parse(tools.dump());
  const nlohmann::json& params = tools_plain[0]["function"]["parameters"];
  for (const auto format : {chat::OutputFormat::kM2, chat::OutputFormat::kM3, chat::OutputFormat::kM1}) {
    const Grammar g = parse_gbnf(format == chat::OutputFormat::kM3   ? m3_tool_call_gbnf(tools, "book")
                                 : format == chat::OutputFormat::kM1 ? m1_tool_call_gbnf(tools, "book")
                                                                     : m2_tool_call_gbnf(tools, "book"));
    std::mt19937 rng(40 + int(format));
    std::set<std::string> nulls_seen;
    for (int i = 0; i < 400; ++i) {
      const std::string s = derive(g, rng, g.root);
      const chat::ParsedDelta d = chat::parse_full(format, s, tools_plain, /*starts_in_reasoning=*/false);
      ASSERT_EQ(d.tool_calls.size(), 1u) << s;
      const auto a = nlohmann::json::parse(d.tool_calls[0].arguments_json);
      ASSERT_EQ(violation(a, params), "") << d.tool_calls[0].arguments_json << "\n" << s;
      nulls_seen.insert(a["note"].is_null() ? "note" : "");
      nulls_seen.insert(a["count"].is_null() ? "count" : "");
    }
    EXPECT_TRUE(nulls_seen.count("note") && nulls_seen.count("count")) << "both optional values come out null sometimes";
  }
  // The null words themselves never come out of a length-bounded M2 string, though their lengths fit.
  const Grammar g = parse_gbnf(m2_tool_call_gbnf(tools, "book"));
  Automaton a(g);
  const std::vector<std::pair<std::string, bool>> words = {  // the "word" value (3..4 code points), accepted
      {"nil", false}, {"NULL", false}, {"None", false}, {"nul", true}, {"nils", true}, {"Nonet", false}, {"n l", true}, {" ab", false}};
  for (const auto& [word, accepted] : words) {
    const std::string call = "<minimax:tool_call>\n<invoke name=\"book\">\n<parameter name=\"code\">ab</parameter>\n"
                             "<parameter name=\"word\">" + word + "</parameter>\n";
    EXPECT_EQ(a.walk(a.start(), call) != Automaton::kDead, accepted) << word;
  }
  // What cannot be typed back is refused, naming the keyword.
  const std::vector<std::tuple<std::string, std::string, bool>> bad = {  // schema, keyword, m3 (else m2)
      {R"({"anyOf":[{"type":"string"},{"type":"integer"}]})", "anyOf", false},
      {R"({"type":["string","integer"]})", "type", false},
      {R"({"anyOf":[{"type":"integer"},{"type":"boolean"}]})", "anyOf", true},
      {R"({"$ref":"#/$defs/x"})", "$ref", true},
      {R"({"allOf":[{"type":"string"}]})", "allOf", true},
      {R"({"type":"string","minLength":3,"maxLength":2})", "maxLength", false},
      {R"({"type":"string","minLength":20000})", "minLength", true},
      {R"({"const":"None"})", "const", false},
  };
  for (const auto& [schema, kw, m3] : bad) {
    auto t = nlohmann::ordered_json::parse(R"([{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"x":0}}}}])");
    t[0]["function"]["parameters"]["properties"]["x"] = nlohmann::ordered_json::parse(schema);
    try {
      m3 ? m3_tool_call_gbnf(t, "") : m2_tool_call_gbnf(t, "");
      ADD_FAILURE() << "accepted: " << schema;
    } catch (const SchemaError& e) {
      EXPECT_EQ(e.keyword(), kw) << schema << " -> " << e.what();
    }
  }
}

// Numbers with bounds (minimum / maximum / exclusive*, integral or not, negative or not) against
// exact arithmetic: every probe k / 1000 in a range around the bounds, written as JSON writes it
// and with a trailing zero, is accepted exactly when it is within them; derived sentences are
// numbers within them (compared as doubles, as ajv does). Integer schemas round a fractional bound
// inward (an integer >= 0.5 is >= 1).
TEST(Grammar, NumberRangesMatchArithmetic) {
  struct Case {
    const char* schema;
    std::optional<int64_t> lo, hi;  // the bounds x 1000
    bool lo_incl = true, hi_incl = true;
  };
  const std::vector<Case> cases = {
      {R"({"type":"number","minimum":0})", 0, std::nullopt},
      {R"({"type":"number","minimum":0,"maximum":600000})", 0, 600000000},
      {R"({"type":"number","exclusiveMinimum":0})", 0, std::nullopt, false},
      {R"({"type":"number","minimum":0,"maximum":1})", 0, 1000},
      {R"({"type":"number","minimum":-2.25,"exclusiveMaximum":3.5})", -2250, 3500, true, false},
      {R"({"type":"number","exclusiveMinimum":-1.5,"maximum":-0.125})", -1500, -125, false, true},
      {R"({"type":"number","maximum":-3})", std::nullopt, -3000},
      {R"({"type":"number","exclusiveMaximum":0.5})", std::nullopt, 500, true, false},
      {R"({"type":"number","minimum":0.1,"maximum":0.1})", 100, 100},
      {R"({"type":"number","minimum":12.05,"maximum":12.5})", 12050, 12500},
      {R"({"type":"number","minimum":-0.75,"maximum":0.75,"exclusiveMinimum":-0.75})", -750, 750, false, true},
      {R"({"type":["number","null"],"minimum":1,"maximum":7})", 1000, 7000},
      {R"({"type":"number","minimum":1e-2,"maximum":2.5e1})", 10, 25000},
  };
  std::mt19937 rng(12);
  for (const Case& k : cases) {
    SCOPED_TRACE(k.schema);
    const Grammar g = parse_gbnf(json_schema_to_gbnf(nlohmann::json::parse(k.schema)));
    Automaton a(g);
    std::vector<int64_t> probe;  // x 1000
    for (int64_t v = -4000; v <= 4000; v += 1) probe.push_back(v);
    for (const std::optional<int64_t>& v : {k.lo, k.hi})
      if (v)
        for (int64_t d = -30; d <= 30; ++d) probe.push_back(*v + d);
    for (int i = 0; i < 3000; ++i) probe.push_back(int64_t(rng() % 2000000000) - 1000000000);
    auto text = [](int64_t v, bool pad) {  // v / 1000, shortest form (or with a trailing 0)
      std::string t = std::to_string(std::llabs(v) / 1000);
      std::string f = std::to_string(std::llabs(v) % 1000);
      f = std::string(3 - f.size(), '0') + f;
      while (!f.empty() && f.back() == '0') f.pop_back();
      if (pad) f += "0";
      if (!f.empty()) t += "." + f;
      return (v < 0 ? "-" : "") + t;
    };
    for (int64_t v : probe) {
      const bool in = (!k.lo || (k.lo_incl ? v >= *k.lo : v > *k.lo)) && (!k.hi || (k.hi_incl ? v <= *k.hi : v < *k.hi));
      for (bool pad : {false, true}) ASSERT_EQ(automaton_accepts(a, text(v, pad)), in) << text(v, pad);
    }
    EXPECT_FALSE(automaton_accepts(a, "-0"));
    EXPECT_FALSE(automaton_accepts(a, "01"));
    EXPECT_FALSE(automaton_accepts(a, "1."));
    const nlohmann::json schema = nlohmann::json::parse(k.schema);
    for (int i = 0; i < 300; ++i) {
      const std::string s = derive(g, rng, g.root);
      const nlohmann::json v = nlohmann::json::parse(s);
      ASSERT_EQ(violation(v, schema), "") << s;
    }
  }
  // Integers with fractional bounds: the nearest integers inside.
  Automaton a(parse_gbnf(json_schema_to_gbnf(nlohmann::json::parse(R"({"type":"integer","minimum":0.5,"exclusiveMaximum":3.5})"))));
  for (int v = -3; v <= 6; ++v) EXPECT_EQ(automaton_accepts(a, std::to_string(v)), v >= 1 && v <= 3) << v;
}

// propertyNames {"type": "string"} changes nothing (every key is a string); an anyOf of only string
// consts / enums is one enum (the forced-tool grammars need that: a union of strings cannot be
// written raw); a maxLength above the repetition cap is no bound (a minLength above it is refused).
TEST(Grammar, HarnessSchemaShapes) {
  const auto record = nlohmann::json::parse(R"({"type":"object","propertyNames":{"type":"string"},"additionalProperties":{"type":"string"}})");
  const Grammar g = parse_gbnf(json_schema_to_gbnf(record));
  Automaton a(g);
  EXPECT_TRUE(automaton_accepts(a, R"({"k": "v", "k2": "w"})"));
  EXPECT_FALSE(automaton_accepts(a, R"({"k": 1})"));
  std::mt19937 rng(13);
  for (int i = 0; i < 100; ++i) {
    const std::string s = derive(g, rng, g.root);
    ASSERT_EQ(violation(nlohmann::json::parse(s), record), "") << s;
  }
  const auto choices = nlohmann::json::parse(R"({"anyOf":[{"type":"string","enum":["pending","in_progress"]},{"const":"deleted"},{"enum":["pending","done"],"description":"d"}]})");
  Automaton c(parse_gbnf(json_schema_to_gbnf(choices)));
  for (const char* v : {"\"pending\"", "\"in_progress\"", "\"deleted\"", "\"done\""}) EXPECT_TRUE(automaton_accepts(c, v)) << v;
  for (const char* v : {"\"pend\"", "\"x\"", "null"}) EXPECT_FALSE(automaton_accepts(c, v)) << v;
  const std::optional<nlohmann::ordered_json> e = string_choices(nlohmann::ordered_json::parse(choices.dump()));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->dump(), R"({"enum":["pending","in_progress","deleted","done"]})");
  // oneOf: a value in two branches matches both, so it is out.
  EXPECT_EQ(string_choices(nlohmann::ordered_json::parse(R"({"oneOf":[{"enum":["a","b"]},{"enum":["b","c"]}]})"))->dump(), R"({"enum":["a","c"]})");
  EXPECT_FALSE(string_choices(nlohmann::ordered_json::parse(R"({"anyOf":[{"const":"a"},{"type":"string","minLength":2}]})")));
  EXPECT_FALSE(string_choices(nlohmann::ordered_json::parse(R"({"anyOf":[{"const":"a"},{"const":1}]})")));
  Automaton big(parse_gbnf(json_schema_to_gbnf(nlohmann::json::parse(R"({"type":"string","minLength":2,"maxLength":100000})"))));
  EXPECT_TRUE(automaton_accepts(big, "\"" + std::string(20000, 'x') + "\""));
  EXPECT_FALSE(automaton_accepts(big, "\"x\""));
}

// The tool schemas the coding agents send, with the keywords that were refused before: Claude Code
// 2.1's (zod's JSON Schema: integer exclusiveMinimum 0 / maximum 2^53-1, number minimum /
// maximum, propertyNames {"type": "string"} records, additionalProperties {} or a schema, a status
// anyOf of a string enum and a string const, minItems / maxItems) and Codex's (shell, apply_patch,
// update_plan). Every format's forced-call grammar takes them; derived calls parse back valid
// under the independent check above.
TEST(Grammar, ForcedCallsOverAgentToolSchemas) {
  const auto tools = nlohmann::ordered_json::parse(R"([
    {"type":"function","function":{"name":"Task","parameters":{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{
      "description":{"description":"A short description","type":"string"},"prompt":{"type":"string"},
      "model":{"type":"string","enum":["sonnet","opus","haiku"]},"run_in_background":{"type":"boolean"},
      "max_turns":{"type":"integer","exclusiveMinimum":0,"maximum":9007199254740991}},
      "required":["description","prompt","max_turns"],"additionalProperties":false}}},
    {"type":"function","function":{"name":"TaskOutput","parameters":{"type":"object","properties":{
      "task_id":{"type":"string"},"block":{"default":true,"type":"boolean"},
      "timeout":{"description":"Max wait time in ms","default":30000,"type":"number","minimum":0,"maximum":600000}},
      "required":["task_id","block","timeout"],"additionalProperties":false}}},
    {"type":"function","function":{"name":"TaskCreate","parameters":{"type":"object","properties":{
      "subject":{"type":"string"},"metadata":{"type":"object","propertyNames":{"type":"string"},"additionalProperties":{}}},
      "required":["subject"],"additionalProperties":false}}},
    {"type":"function","function":{"name":"TaskUpdate","parameters":{"type":"object","properties":{
      "taskId":{"type":"string"},
      "status":{"anyOf":[{"type":"string","enum":["pending","in_progress","completed"]},{"type":"string","const":"deleted"}]}},
      "required":["taskId","status"],"additionalProperties":false}}},
    {"type":"function","function":{"name":"AskUserQuestion","parameters":{"type":"object","properties":{
      "questions":{"minItems":1,"maxItems":2,"type":"array","items":{"type":"object","properties":{
        "question":{"type":"string"},"options":{"minItems":2,"maxItems":3,"type":"array","items":{"type":"object",
          "properties":{"label":{"type":"string"},"description":{"type":"string"}},"required":["label","description"],"additionalProperties":false}},
        "multiSelect":{"default":false,"type":"boolean"}},"required":["question","options","multiSelect"],"additionalProperties":false}},
      "answers":{"type":"object","propertyNames":{"type":"string"},"additionalProperties":{"type":"string"}}},
      "required":["questions"],"additionalProperties":false}}},
    {"type":"function","function":{"name":"shell","parameters":{"type":"object","properties":{
      "command":{"type":"array","items":{"type":"string"}},"workdir":{"type":"string"},"timeout_ms":{"type":"number"}},
      "required":["command"],"additionalProperties":false}}},
    {"type":"function","function":{"name":"update_plan","parameters":{"type":"object","properties":{
      "explanation":{"type":"string"},"plan":{"type":"array","items":{"type":"object","properties":{
        "step":{"type":"string"},"status":{"type":"string","enum":["pending","in_progress","completed"]}},
        "required":["step","status"],"additionalProperties":false}}},"required":["plan"],"additionalProperties":false}}},
    {"type":"function","function":{"name":"apply_patch","parameters":{"type":"object","properties":{"input":{"type":"string"}},
      "required":["input"],"additionalProperties":false}}}])");
  const nlohmann::json tools_plain = nlohmann::json::parse(tools.dump());
  std::map<std::string, nlohmann::json> params;
  for (const auto& t : tools_plain) params[t["function"]["name"]] = t["function"]["parameters"];
  for (const auto format : {chat::OutputFormat::kM2, chat::OutputFormat::kM3, chat::OutputFormat::kM1}) {
    SCOPED_TRACE(int(format));
    std::string gbnf;
    ASSERT_NO_THROW(gbnf = format == chat::OutputFormat::kM3   ? m3_tool_call_gbnf(tools, "")
                           : format == chat::OutputFormat::kM1 ? m1_tool_call_gbnf(tools, "")
                                                               : m2_tool_call_gbnf(tools, ""));
    const Grammar g = parse_gbnf(gbnf);
    std::mt19937 rng(50 + int(format));
    std::set<std::string> called;
    for (int i = 0; i < 300; ++i) {
      const std::string s = derive(g, rng, g.root);
      const chat::ParsedDelta d = chat::parse_full(format, s, tools_plain, /*starts_in_reasoning=*/false);
      ASSERT_FALSE(d.tool_calls.empty()) << s;
      for (const chat::ToolCall& c : d.tool_calls) {
        ASSERT_TRUE(params.count(c.name)) << c.name;
        called.insert(c.name);
        ASSERT_EQ(violation(nlohmann::json::parse(c.arguments_json), params[c.name]), "")
            << c.name << " " << c.arguments_json << "\n" << s;
      }
    }
    EXPECT_EQ(called.size(), params.size()) << "every tool is called at least once";
  }
}

// ---- tokens ----

struct Vocab {
  tok::Tokenizer tok;
  std::shared_ptr<const VocabTrie> trie;
  int32_t eos;
};

Vocab& tiny_vocab() {
  static Vocab v = [] {
    const TinyTokenizer t = build_tiny_tokenizer(600);
    auto tk = tok::Tokenizer::from_json_text(t.tokenizer_json);
    auto trie = std::make_shared<const VocabTrie>(tk);
    return Vocab{std::move(tk), std::move(trie), int32_t(t.eos_id)};
  }();
  return v;
}

TEST(TokenMask, TrieWalkEqualsEveryTokenAlone) {
  Vocab& v = tiny_vocab();
  const Grammar g = parse_gbnf(json_schema_to_gbnf(nlohmann::json::parse(
      R"({"type":"object","properties":{"text":{"type":"string"},"n":{"type":"integer"},"list":{"type":"array","items":{"type":"number"}}},"required":["text","n","list"]})")));
  TokenMasker m(v.trie, g, false);
  Automaton ref(g);  // its own states: walked token by token
  std::mt19937 rng(5);
  for (int run = 0; run < 6; ++run) {
    int32_t st = m.start();
    for (int step = 0; step < 40 && !m.finished(st); ++step) {
      for (int64_t left : {int64_t(1000), int64_t(40), int64_t(12), int64_t(3), int64_t(1)}) {
        Bits bits;
        m.allowed(st, left, bits);
        std::vector<int32_t> ok;
        for (int32_t id = 0; id < v.trie->n_vocab(); ++id) {
          const bool allowed = bits[size_t(id) >> 6] >> (id & 63) & 1;
          const std::string& b = v.trie->bytes(id);
          bool want = !b.empty() && !v.tok.is_special(id);
          if (want) {
            const int32_t s2 = m.advance(st, id);
            want = s2 != Automaton::kDead && int64_t(m.dist(s2)) <= left - 1;
          }
          ASSERT_EQ(allowed, want) << "id " << id << " '" << b << "' left " << left;
          if (allowed && left == 1000) ok.push_back(id);
        }
        if (left == 1000) {
          ASSERT_FALSE(ok.empty());
          st = m.advance(st, ok[rng() % ok.size()]);
        }
      }
    }
  }
  const auto s = m.stats();
  EXPECT_GT(s.cache_hits, 0);
}

TEST(TokenMask, ConstrainedSamplingAlwaysFinishesValid) {
  Vocab& v = tiny_vocab();
  const std::vector<std::string> schemas = {
      "",  // json_object
      R"({"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1,"maximum":14},"units":{"enum":["c","f"]}},"required":["city","days","units"],"additionalProperties":false})",
      R"({"type":"array","items":{"type":"object","properties":{"k":{"type":"string","maxLength":4}},"required":["k"]},"minItems":2})"};
  std::mt19937 rng(77);
  int n = 0;
  for (const std::string& sc : schemas) {
    const std::string gbnf = sc.empty() ? json_object_gbnf() : json_schema_to_gbnf(nlohmann::json::parse(sc));
    auto masker = std::make_shared<TokenMasker>(v.trie, parse_gbnf(gbnf), false);
    const uint32_t need = masker->dist(masker->start());
    for (int r = 0; r < 70; ++r, ++n) {
      const int64_t max_tokens = need + 1 + rng() % 60;  // + the stop token
      GrammarConstraint c(masker);
      SamplingParams p;
      p.temperature = 1.0f;
      p.seed = uint64_t(n);
      const std::vector<int32_t> stops{v.eos};
      Sampler sampler(p, {}, stops);
      std::vector<float> logits(size_t(v.trie->n_vocab()));
      std::normal_distribution<float> z(0.f, 3.f);
      std::vector<int32_t> out;
      bool stopped = false;
      for (int64_t t = 0; t < max_tokens; ++t) {
        for (float& x : logits) x = z(rng);
        logits[size_t(v.eos)] += 2.f;  // a model keen to stop early
        c.restrict(logits.data(), int64_t(logits.size()), max_tokens - t, stops);
        const int32_t id = sampler.sample(logits.data(), int64_t(logits.size()));
        c.accept(id);
        if (id == v.eos) {
          stopped = true;
          break;
        }
        out.push_back(id);
      }
      const std::string text = v.tok.decode(out);
      SCOPED_TRACE(text);
      ASSERT_TRUE(nlohmann::json::accept(text)) << "max_tokens " << max_tokens;
      ASSERT_TRUE(stopped) << "a complete reply ends with the stop id within max_tokens " << max_tokens;
    }
  }
}

// A reasoning budget (Anthropic thinking.budget_tokens): with random logits the end tag comes at
// token budget + 1 at the latest (as its id or spelled in bytes), never later; after it nothing
// is steered (ReasoningBudget) or the grammar holds (GrammarConstraint with a budgeted gate).
TEST(TokenMask, ReasoningBudgetForcesTheEndTag) {
  Vocab& v = tiny_vocab();
  const int32_t end = v.tok.token_to_id("</think>");
  ASSERT_GE(end, 0);
  auto masker = std::make_shared<TokenMasker>(v.trie, parse_gbnf(json_object_gbnf()), false);
  std::mt19937 rng(5);
  for (int r = 0; r < 60; ++r) {
    const int64_t budget = rng() % 12, max_tokens = 80;
    Gate g{end, "</think>", budget};
    const bool with_grammar = r % 2;
    std::unique_ptr<TokenConstraint> c;
    if (with_grammar) c = std::make_unique<GrammarConstraint>(masker, g);
    else c = std::make_unique<ReasoningBudget>(v.trie, g);
    std::vector<float> logits(size_t(v.trie->n_vocab()));
    std::normal_distribution<float> z(0.f, 3.f);
    const std::vector<int32_t> stops{v.eos};
    int64_t at = -1, t = 0;
    std::string after;
    for (; t < max_tokens; ++t) {
      for (float& x : logits) x = z(rng);
      logits[size_t(v.eos)] = -1e9f;  // keep going: the budget, not a stop, must end the reasoning
      logits[size_t(end)] = -30.f;     // a model that would not close its reasoning by itself
      c->restrict(logits.data(), int64_t(logits.size()), max_tokens - t, stops);
      int32_t id = 0;
      for (int32_t i = 1; i < int32_t(logits.size()); ++i)
        if (logits[size_t(i)] > logits[size_t(id)]) id = i;  // greedy over what is allowed
      c->accept(id);
      if (at >= 0 && id != v.eos) after += v.tok.decode(std::vector<int32_t>{id});
      if (id == end && at < 0) at = t;
      if (with_grammar && at >= 0 && id == v.eos) break;
    }
    ASSERT_EQ(at, budget) << "the end tag is the token after the budget";
    if (with_grammar) {
      ASSERT_TRUE(nlohmann::json::accept(after)) << after;
    } else {
      ASSERT_GT(after.size(), 0u);
    }
  }
}

}  // namespace
}  // namespace mmx::grammar
