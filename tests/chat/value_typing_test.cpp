// Parameter typing rules (M2 and M3 flavours of vLLM) and the json.dumps-style writer.
#include "chat/value_typing.h"

#include <gtest/gtest.h>

namespace mmx::chat {
namespace {

std::string m2(const std::string& v, std::vector<std::string> types) {
  return dump_py(m2_convert(v, types));
}

TEST(DumpPy, PythonLayout) {
  ojson j = ojson::parse(
      R"({"b": [1, 2.5, "x"], "a": {"k": null, "t": true}, "u": "é\n\"", "e": {}, "l": []})");
  EXPECT_EQ(dump_py(j),
            R"({"b": [1, 2.5, "x"], "a": {"k": null, "t": true}, "u": "é\n\"", "e": {}, "l": []})");
  EXPECT_EQ(dump_py(ojson(1e-7)), "1e-07");
  EXPECT_EQ(dump_py(ojson(1e16)), "1e+16");
  EXPECT_EQ(dump_py(ojson(100.0)), "100.0");
  EXPECT_EQ(dump_py(ojson(std::string("\x01"))), "\"\\u0001\"");
}

TEST(PyNumbers, IntGrammar) {
  ojson v;
  EXPECT_TRUE(py_parse_int(" -42 ", v));
  EXPECT_EQ(v, -42);
  EXPECT_TRUE(py_parse_int("1_000", v));
  EXPECT_EQ(v, 1000);
  EXPECT_TRUE(py_parse_int("+007", v));
  EXPECT_EQ(v, 7);
  EXPECT_TRUE(py_parse_int("18446744073709551615", v));
  EXPECT_TRUE(v.is_number_unsigned());
  for (const char* bad : {"", "1.0", "1__0", "_1", "1_", "0x10", "1e3", "--1", "one"})
    EXPECT_FALSE(py_parse_int(bad, v)) << bad;
}

TEST(PyNumbers, FloatGrammar) {
  double d;
  EXPECT_TRUE(py_parse_float("2.5", d));
  EXPECT_EQ(d, 2.5);
  EXPECT_TRUE(py_parse_float(" .5e1 ", d));
  EXPECT_EQ(d, 5.0);
  EXPECT_TRUE(py_parse_float("5.", d));
  EXPECT_TRUE(py_parse_float("1_0.2_5", d));
  EXPECT_EQ(d, 10.25);
  for (const char* bad : {"", ".", "e5", "1e", "inf", "nan", "1,5", "1e999"})
    EXPECT_FALSE(py_parse_float(bad, d)) << bad;
}

TEST(M2Convert, Rules) {
  EXPECT_EQ(m2("Paris", {"string"}), "\"Paris\"");
  EXPECT_EQ(m2("42", {"string"}), "\"42\"");
  EXPECT_EQ(m2("NULL", {"string"}), "null");  // vLLM: null literal wins over the type
  EXPECT_EQ(m2("42", {"integer"}), "42");
  EXPECT_EQ(m2("4.0", {"number"}), "4");
  EXPECT_EQ(m2("4.5", {"number"}), "4.5");
  EXPECT_EQ(m2("4.5", {"integer", "string"}), "\"4.5\"");
  EXPECT_EQ(m2("4.5", {"integer"}), "4.5");  // falls through to the JSON fallback
  EXPECT_EQ(m2("yes", {"boolean"}), "true");
  EXPECT_EQ(m2("Off", {"boolean"}), "false");
  EXPECT_EQ(m2("[1,2]", {"object"}), "[1, 2]");  // any JSON for object/array, as vLLM
  EXPECT_EQ(m2("{bad", {"object"}), "\"{bad\"");
  EXPECT_EQ(m2("{\"a\": 1}", {"weird"}), "{\"a\": 1}");
  EXPECT_EQ(m2("inf", {"number"}), "\"inf\"");
}

TEST(M2Types, FromSchema) {
  auto s = nlohmann::json::parse(R"({"anyOf": [{"type": "integer"}, {"enum": [true, null]}, {}]})");
  auto t = m2_types_of(&s);
  std::sort(t.begin(), t.end());
  EXPECT_EQ(t, (std::vector<std::string>{"boolean", "integer", "null", "string"}));
  EXPECT_EQ(m2_types_of(nullptr), std::vector<std::string>{"string"});
}

TEST(M3Convert, Confidence) {
  auto t = [](const char* schema) { return M3Type::from_property(nlohmann::json::parse(schema)); };
  EXPECT_EQ(dump_py(t(R"({"type": ["string", "integer"]})").convert("42")), "42");
  EXPECT_EQ(dump_py(t(R"({"type": ["string", "integer"]})").convert("4x")), "\"4x\"");
  EXPECT_EQ(dump_py(t(R"({"type": "boolean"})").convert(" TRUE ")), "true");
  EXPECT_EQ(dump_py(t(R"({"type": "boolean"})").convert("maybe")), "\"maybe\"");  // vLLM: false
  EXPECT_EQ(dump_py(t(R"({"type": "number"})").convert("3.0")), "3");
  EXPECT_EQ(dump_py(t(R"({"type": "number"})").convert("-inf")), "\"-Infinity\"");
  EXPECT_EQ(dump_py(t(R"({"type": ["integer", "null"]})").convert("null")), "null");
  EXPECT_EQ(dump_py(t(R"({"type": "array"})").convert("")), "[]");
  EXPECT_EQ(dump_py(t(R"({"properties": {}})").convert("{\"a\": 1}")), "{\"a\": 1}");
  EXPECT_EQ(dump_py(t("null").convert(" raw ")), "\" raw \"");
  auto rows = t(
      R"({"type": "array", "items": {"type": "object", "properties": {"v": {"type": "number"}}}})");
  auto item = rows.item(0);
  ASSERT_TRUE(item.has_value());
  EXPECT_TRUE(item->has(M3Atom::kObject));
  auto v = item->property("v");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(dump_py(v->convert("1.5")), "1.5");
  EXPECT_FALSE(item->property("zz").has_value());
}

}  // namespace
}  // namespace mmx::chat
