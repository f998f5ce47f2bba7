// Incremental block reader for the M3 namespaced tool-call format (tool_blocks.h), following the facts of
// vLLM's `_llm_nom/m3_text.py` M3TextParser:
//   * every structural tag is preceded by the namespace token NS = "]<]minimax[>[";
//   * `NS<invoke name="f">` ... `NS</invoke>`; parameters are `NS<key>value NS</key>` tags;
//   * a parameter whose body starts with `NS<` is nested: split the body on NS and rebuild it
//     with a tag stack (objects from tags, arrays when the schema allows an array and the first
//     child is `<item>`, a repeated tag collapses into a list, text beside child tags goes to a
//     "$text" key unless it is only whitespace, an unmatched close tag pops up to its opener);
//     leaves are typed by M3Type. The body runs to the `NS</k>` that closes it at nesting level 0,
//     so a nested element may be called `invoke`, `tool_call` or `k` itself. Deeper than
//     kMaxNesting levels, the value is the body text as written (a string): vLLM's limit, and it
//     keeps the rebuild linear and the JSON writer's recursion bounded;
//   * a flat parameter body runs to the first NS (never part of a value): `NS</k>` closes it; any
//     other tag ends it too and is read next. It is typed by M3Type::convert (no whitespace
//     stripping); one whose type can only be a string is that text verbatim, so it streams as
//     written (kStringOpen);
//   * null values are simply absent (the template omits them), so nothing to do on parse.
#include "chat/tool_blocks.h"

#include <algorithm>

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
    std::string text;
    for (const auto& t : texts) text += t;
    if (kind == kObject && !only_space(text)) {
      ojson v = value;
      std::string key = "$text";
      while (v.contains(key)) key = "$" + key;
      v[key] = text;
      return v;
    }
    return value;
  }

  static bool only_space(const std::string& t) {
    for (char c : t)
      if (!is_space(c)) return false;
    return true;
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
      if (only_space(text)) return;  // layout between items
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

constexpr size_t kMaxNesting = 128;

// The deepest nesting of `chunks` (an opening tag is one level down, a close tag one up).
size_t nesting_depth(const std::vector<std::string_view>& chunks) {
  size_t depth = 0, deepest = 0;
  for (size_t k = 1; k < chunks.size(); ++k) {
    if (starts_with(chunks[k], 0, "</")) {
      if (depth > 0) --depth;
    } else if (starts_with(chunks[k], 0, "<")) {
      deepest = std::max(deepest, ++depth);
    }
  }
  return deepest;
}

ojson parse_nested(std::string_view body, const M3Type& type) {
  std::vector<std::string_view> chunks = split_ns(body);
  if (nesting_depth(chunks) > kMaxNesting) return std::string(body);
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

// Where the body of nested parameter `name` (text after its opening tag, starting with NS<) ends:
// at the NS of the `NS</name>` that closes it (`own`), or of an `NS</invoke>` / block end (`own`
// false: the parameter never closed), each unless it closes an element opened inside the body.
// Tags are tracked as parse_nested reads them: a close tag pops up to its opener; another close
// without an opener is ignored. npos: not yet seen.
struct NestedEnd {
  size_t at = std::string_view::npos;
  bool own = false;
  bool incomplete = false;  // the text ends inside a tag: more may decide it
};
NestedEnd scan_nested(std::string_view body, std::string_view name, ScanCache& cache) {
  std::vector<std::string>& open = cache.open;  // tags opened inside the body
  for (size_t p = body.find(kM3Namespace, cache.scanned); p != std::string_view::npos;
       p = body.find(kM3Namespace, p + 1)) {
    cache.scanned = p;  // (resume at this token if it is incomplete)
    const std::string_view after = body.substr(p + kM3Namespace.size());
    const bool close = starts_with(after, 0, "</");
    if (!close && !starts_with(after, 0, "<")) {
      if (after.size() < 2) return {std::string_view::npos, false, true};
      continue;
    }
    const size_t skip = close ? 2 : 1;
    const size_t gt = after.find('>', skip);
    if (gt == std::string_view::npos) return {std::string_view::npos, false, true};
    const std::string_view tag = after.substr(skip, gt - skip);
    if (!close) {
      open.emplace_back(tag);
      continue;
    }
    const auto it = std::find(open.rbegin(), open.rend(), tag);
    if (it != open.rend()) {
      open.erase(std::next(it).base(), open.end());
    } else if (tag == name) {
      return {p, true, false};  // closes the parameter (and children left open, as parse_nested does)
    } else if (tag == "invoke" || tag == "tool_call") {
      return {p, false, false};
    }
  }
  // Nothing decisive yet: resume where a namespace token may still begin.
  cache.scanned = std::max(cache.scanned, body.size() >= kM3Namespace.size() ? body.size() - kM3Namespace.size() + 1 : 0);
  return {};
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

  if (!ctx.in_invoke) {
    if (starts_with(rest, 0, invoke_start)) {
      const size_t be = rest.find(ctx.block_end);
      const bool cut = be != std::string_view::npos || final;  // an open element can never close
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
    const size_t gt = rest.find('>', p);
    if (gt == std::string_view::npos) {
      const bool cut = final || rest.find(ctx.block_end) != std::string_view::npos;  // can never close
      return step(cut ? BlockStep::kBad : BlockStep::kWait, i);
    }
    const std::string_view tag_text = rest.substr(0, gt);  // the tag must not run into a closing tag
    if (gt == p || tag_text.find(invoke_end) != std::string_view::npos ||
        tag_text.find(ctx.block_end) != std::string_view::npos)
      return step(BlockStep::kBad, i);
    const std::string name(rest.substr(p, gt - p));
    const M3Type type = M3Type::of_parameter(ctx.fn_params, name);
    const std::string_view body = rest.substr(gt + 1);
    const size_t at = i + gt + 1;  // where the body starts in `text`
    ScanCache local;
    ScanCache& cache = ctx.cache != nullptr ? *ctx.cache : local;
    if (cache.body_at != at) {
      cache.reset();
      cache.body_at = at;
    }
    const std::string close = std::string(kM3Namespace) + "</" + name + ">";
    // Nested (or an empty object, `NS<k>NS</k>`): the body starts with `NS<`, after layout
    // whitespace unless the value can only be a string (that streams from its first byte).
    const bool string_only = type.candidates.size() == 1 && type.candidates[0] == M3Atom::kString;
    size_t lead = 0;
    if (!string_only)
      while (lead < body.size() && is_space(body[lead])) ++lead;
    if (!final && lead == body.size() && lead > 0) return step(BlockStep::kWait, i);
    if (starts_with(body, lead, open)) {
      const NestedEnd e = scan_nested(body, name, cache);
      if (e.at == std::string_view::npos) return step(final ? BlockStep::kBad : BlockStep::kWait, i);
      if (!e.own) return step(BlockStep::kBad, i);  // cut by `NS</invoke>` or the block end
      BlockStep s = step(BlockStep::kParam, at + e.at + close.size());
      s.name = name;
      const std::string_view inner = body.substr(lead, e.at - lead);
      s.value = inner.empty() ? type.convert("") : parse_nested(inner, type);
      return s;
    }
    if (!final && proper_prefix_of(body.substr(lead), open)) return step(BlockStep::kWait, i);
    // A value that can only be a string (M3Type::convert gives such a value back verbatim; an
    // unknown tool or parameter too) streams as it is written.
    if (string_only) {
      BlockStep s = step(BlockStep::kStringOpen, at);
      s.name = name;
      return s;
    }
    // Flat: the value runs to the first NS.
    const size_t n = body.find(kM3Namespace, cache.scanned);
    if (n == std::string_view::npos) {
      cache.scanned = body.size() >= kM3Namespace.size() ? body.size() - kM3Namespace.size() + 1 : 0;
      return step(final ? BlockStep::kBad : BlockStep::kWait, i);
    }
    cache.scanned = n;
    const std::string_view after = body.substr(n);
    const std::string_view ie_tag = invoke_end, be_tag = ctx.block_end;
    if (!final && (proper_prefix_of(after, close) || proper_prefix_of(after, ie_tag) ||
                   proper_prefix_of(after, be_tag)))
      return step(BlockStep::kWait, i);
    // The parameter must close inside its invoke and its block (as in vLLM's regexes).
    if (starts_with(after, 0, ie_tag) || starts_with(after, 0, be_tag)) return step(BlockStep::kBad, i);
    const bool own = starts_with(after, 0, close);  // else a stray tag ends the value; it is read next
    BlockStep s = step(BlockStep::kParam, at + n + (own ? close.size() : 0));
    s.name = name;
    s.value = type.convert(std::string(body.substr(0, n)));
    return s;
  }
  if (!final && (proper_prefix_of(rest, open) || rest == open))
    return step(BlockStep::kWait, i);
  return step(BlockStep::kBad, i);
}

StringStep read_m3_string(std::string_view text, std::string_view name, std::string_view block_end, bool final) {
  const size_t n = text.find(kM3Namespace);
  if (n == std::string_view::npos) {
    if (final) return {text.size(), true, text.size()};
    size_t keep = 0;  // a tail that may begin NS
    for (size_t k = std::min(kM3Namespace.size() - 1, text.size()); k > 0; --k)
      if (text.substr(text.size() - k) == kM3Namespace.substr(0, k)) {
        keep = k;
        break;
      }
    return {text.size() - keep, false, text.size() - keep};
  }
  const std::string own = std::string(kM3Namespace) + "</" + std::string(name) + ">";
  const std::string invoke_end = std::string(kM3Namespace) + "</invoke>";
  const std::string_view after = text.substr(n);
  if (starts_with(after, 0, own)) return {n, true, n + own.size()};
  if (!final && (proper_prefix_of(after, own) || proper_prefix_of(after, invoke_end) ||
                 proper_prefix_of(after, block_end)))
    return {n, false, n};
  return {n, true, n};  // `NS</invoke>`, the block end, or a stray tag: left for read_m3_step
}

}  // namespace mmx::chat
