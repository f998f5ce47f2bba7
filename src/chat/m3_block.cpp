// Incremental block reader for the M3 namespaced tool-call format (tool_blocks.h), following the facts of
// vLLM's `_llm_nom/m3_text.py` M3TextParser:
//   * every structural tag is preceded by the namespace token NS = "]<]minimax[>[";
//   * `NS<invoke name="f">` ... `NS</invoke>`; parameters are `NS<key>value NS</key>` tags;
//   * a parameter whose body starts with `NS<` is nested: split the body on NS and rebuild it
//     with a tag stack (objects from tags, arrays when the schema allows an array and the first
//     child is `<item>`, a repeated tag collapses into a list, text beside child tags goes to a
//     "$text" key, an unmatched close tag pops up to its opener); leaves are typed by M3Type;
//   * a flat parameter body is typed by M3Type::convert (no whitespace stripping); one whose type
//     can only be a string is that text verbatim, so it streams as written (kStringOpen);
//   * null values are simply absent (the template omits them), so nothing to do on parse.
#include "chat/tool_blocks.h"

namespace mmx::chat {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

bool starts_with(std::string_view s, size_t i, std::string_view p) {
  return s.substr(i, p.size()) == p;
}

// One open tag while rebuilding a nested parameter.
struct Node {
  enum Kind { kLeaf, kObject, kArray };
  std::string tag;
  Kind kind = kLeaf;
  ojson value;                     // object or array when kind != kLeaf
  std::vector<std::string> texts;  // loose text (leaf value, or "$text" of an object)
  std::optional<M3Type> type;      // schema type of this node, if known

  ojson get_value() const {
    if (kind == kLeaf) {
      std::string text;
      for (const auto& t : texts) text += t;
      if (type) return type->convert(text);
      return text;
    }
    if (kind == kObject && !texts.empty()) {
      ojson v = value;
      std::string key = "$text";
      while (v.contains(key)) key = "$" + key;
      std::string text;
      for (const auto& t : texts) text += t;
      v[key] = text;
      return v;
    }
    return value;
  }

  void append(const Node& child) {
    if (kind == kLeaf) {
      kind = kObject;
      value = ojson::object();
    }
    if (kind == kObject) {
      if (value.contains(child.tag)) {
        ojson& existing = value[child.tag];
        if (existing.is_array()) {
          existing.push_back(child.get_value());
        } else {
          ojson list = ojson::array({existing, child.get_value()});
          existing = std::move(list);
        }
      } else {
        value[child.tag] = child.get_value();
      }
    } else {
      value.push_back(child.get_value());
    }
  }

  void append_text(const std::string& text) {
    if (kind == kArray) {
      std::optional<M3Type> item = type ? type->item(value.size()) : std::nullopt;
      value.push_back(item ? item->convert(text) : ojson(text));
    } else {
      texts.push_back(text);
    }
  }

  std::optional<M3Type> child_type(const std::string& child_tag) const {
    if (!type) return std::nullopt;
    if (kind == kArray) return type->item(value.size());
    if (kind == kObject) return type->property(child_tag);
    return std::nullopt;
  }
};

std::vector<std::string_view> split_ns(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  for (;;) {
    size_t j = s.find(kM3Namespace, i);
    if (j == std::string_view::npos) {
      out.push_back(s.substr(i));
      return out;
    }
    out.push_back(s.substr(i, j - i));
    i = j + kM3Namespace.size();
  }
}

// Splits `<tag>value` / `</tag>value` (after the '<' or '</' prefix of length `skip`).
void split_tag(std::string_view chunk, size_t skip, std::string& tag, std::string& value) {
  size_t gt = chunk.find('>', skip);
  if (gt == std::string_view::npos) {
    tag = std::string(chunk.substr(skip));
    value.clear();
  } else {
    tag = std::string(chunk.substr(skip, gt - skip));
    value = std::string(chunk.substr(gt + 1));
  }
}

ojson parse_nested(std::string_view body, const M3Type& type) {
  std::vector<std::string_view> chunks = split_ns(body);
  std::vector<Node> stack(1);
  stack[0].type = type;
  bool is_array =
      type.has(M3Atom::kArray) && chunks.size() > 1 && starts_with(chunks[1], 0, "<item>");
  stack[0].kind = is_array ? Node::kArray : Node::kObject;
  stack[0].value = is_array ? ojson::array() : ojson::object();
  // chunks[0] is empty: the caller checked that the body starts with NS.
  for (size_t k = 1; k < chunks.size(); ++k) {
    std::string_view chunk = chunks[k];
    std::string tag, value;
    if (starts_with(chunk, 0, "</")) {
      split_tag(chunk, 2, tag, value);
      while (stack.size() > 1) {
        Node item = std::move(stack.back());
        stack.pop_back();
        stack.back().append(item);
        if (item.tag == tag) break;
      }
      if (!value.empty()) stack.back().append_text(value);
    } else if (starts_with(chunk, 0, "<")) {
      split_tag(chunk, 1, tag, value);
      Node node;
      node.tag = tag;
      node.type = stack.back().child_type(tag);
      if (node.type && node.type->has(M3Atom::kArray) && k + 1 < chunks.size() &&
          starts_with(chunks[k + 1], 0, "<item>")) {
        node.kind = Node::kArray;
        node.value = ojson::array();
      } else if (node.type && node.type->has(M3Atom::kObject)) {
        node.kind = Node::kObject;
        node.value = ojson::object();
      }
      if (!value.empty()) node.texts.push_back(value);
      stack.push_back(std::move(node));
    } else if (!chunk.empty()) {
      stack.back().append_text(std::string(chunk));
    }
  }
  while (stack.size() > 1) {
    Node item = std::move(stack.back());
    stack.pop_back();
    stack.back().append(item);
  }
  return stack[0].get_value();
}

}  // namespace

BlockStep read_m3_step(std::string_view text, const BlockReadContext& ctx) {
  const std::string invoke_start = std::string(kM3Namespace) + "<invoke name=\"";
  const std::string invoke_end = std::string(kM3Namespace) + "</invoke>";
  const std::string open = std::string(kM3Namespace) + "<";
  auto step = [](BlockStep::Kind kind, size_t consumed) {
    BlockStep s;
    s.kind = kind;
    s.consumed = consumed;
    return s;
  };
  size_t i = 0;
  while (i < text.size() && is_space(text[i])) ++i;
  const std::string_view rest = text.substr(i);
  const bool final = ctx.final;
  if (rest.empty()) return step(final ? BlockStep::kEof : BlockStep::kWait, i);
  if (starts_with(rest, 0, ctx.block_end)) return step(BlockStep::kEnd, i + ctx.block_end.size());
  const size_t be = rest.find(ctx.block_end);
  const bool cut = be != std::string_view::npos || final;  // an open element can never close

  if (!ctx.in_invoke) {
    if (starts_with(rest, 0, invoke_start)) {
      const size_t q = rest.find("\">", invoke_start.size());
      if (q == std::string_view::npos) return step(cut ? BlockStep::kBad : BlockStep::kWait, i);
      if (q == invoke_start.size() || be < q) return step(BlockStep::kBad, i);
      BlockStep s = step(BlockStep::kInvokeOpen, i + q + 2);
      s.name = std::string(rest.substr(invoke_start.size(), q - invoke_start.size()));
      return s;
    }
    if (!final && (proper_prefix_of(rest, invoke_start) || proper_prefix_of(rest, ctx.block_end)))
      return step(BlockStep::kWait, i);
    return step(BlockStep::kBad, i);
  }

  if (starts_with(rest, 0, invoke_end)) return step(BlockStep::kInvokeClose, i + invoke_end.size());
  if (!final && (proper_prefix_of(rest, invoke_end) || proper_prefix_of(rest, ctx.block_end)))
    return step(BlockStep::kWait, i);
  if (starts_with(rest, 0, open) && rest.size() > open.size()) {
    const size_t p = open.size();
    if (rest[p] == '/') return step(BlockStep::kBad, i);  // a close tag with no opener
    const size_t ie = rest.find(invoke_end);
    const size_t gt = rest.find('>', p);
    if (gt == std::string_view::npos) return step(cut ? BlockStep::kBad : BlockStep::kWait, i);
    if (gt == p || ie < gt || be < gt) return step(BlockStep::kBad, i);
    const std::string name(rest.substr(p, gt - p));
    nlohmann::json property;  // null when unknown
    if (ctx.fn_params != nullptr && ctx.fn_params->is_object()) {
      auto props = ctx.fn_params->find("properties");
      if (props != ctx.fn_params->end() && props->is_object()) {
        auto it = props->find(name);
        if (it != props->end()) property = *it;
      }
    }
    const M3Type type = M3Type::from_property(property);
    // A value that can only be a string (M3Type::convert gives such a value back verbatim; an
    // unknown tool or parameter too) streams as it is written, once its first bytes show it is
    // flat text: a body that begins with `NS<` is nested (or empty) and is read whole below.
    if (type.candidates.size() == 1 && type.candidates[0] == M3Atom::kString) {
      const std::string_view body = rest.substr(gt + 1);
      if (!starts_with(body, 0, open)) {
        if (!final && proper_prefix_of(body, open)) return step(BlockStep::kWait, i);
        BlockStep s = step(BlockStep::kStringOpen, i + gt + 1);
        s.name = name;
        return s;
      }
    }
    const std::string close = std::string(kM3Namespace) + "</" + name + ">";
    const size_t c = rest.find(close, gt + 1);
    if (c == std::string_view::npos)
      return step(cut || ie != std::string_view::npos ? BlockStep::kBad : BlockStep::kWait, i);
    // The parameter must close inside its invoke and its block (a parameter called "invoke"
    // or "tool_call" therefore never closes, as in vLLM's regexes).
    if (ie <= c || be <= c) return step(BlockStep::kBad, i);
    const std::string_view inner = rest.substr(gt + 1, c - gt - 1);
    BlockStep s = step(BlockStep::kParam, i + c + close.size());
    s.name = name;
    s.value = starts_with(inner, 0, open) ? parse_nested(inner, type) : type.convert(std::string(inner));
    return s;
  }
  if (!final && (proper_prefix_of(rest, open) || rest == open))
    return step(BlockStep::kWait, i);
  return step(BlockStep::kBad, i);
}

StringStep read_m3_string(std::string_view text, std::string_view name, std::string_view block_end, bool final) {
  const std::string ns(kM3Namespace);
  return read_string_to(text, ns + "</" + std::string(name) + ">", ns + "</invoke>", block_end, final);
}

}  // namespace mmx::chat
