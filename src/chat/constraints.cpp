#include "chat/constraints.h"

#include <fmt/format.h>

#include "grammar/constraint.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/tool_grammar.h"
#include "chat/chat_error.h"

namespace mmx::chat {

namespace {
constexpr size_t kKeptGrammars = 32;
constexpr const char* kAfterReasoning = "mmx-after-reasoning";
}  // namespace

// (Under mu_.)
std::shared_ptr<const grammar::VocabTrie> Constraints::trie(const char* param) {
  if (!trie_) {
    try {
      trie_ = std::make_shared<const grammar::VocabTrie>(*m_.tokenizer);
    } catch (const Error& e) {
      invalid(std::string("structured output is not available for this model: ") + e.what(), param);
    }
  }
  return trie_;
}

std::shared_ptr<grammar::TokenMasker> Constraints::masker(const std::string& gbnf, bool allow_special, const char* param) {
  const std::string key = std::string(allow_special ? "S" : "T") + gbnf;
  std::shared_ptr<const grammar::VocabTrie> trie;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (auto it = lru_.begin(); it != lru_.end(); ++it)
      if (it->first == key) {
        lru_.splice(lru_.begin(), lru_, it);
        return it->second;
      }
    trie = this->trie(param);
  }
  // Compiled outside the lock: one large grammar does not hold up the other requests.
  const bool wrapped = gbnf.find(std::string(kAfterReasoning) + " ::=") != std::string::npos;
  std::shared_ptr<grammar::TokenMasker> m;
  try {
    m = std::make_shared<grammar::TokenMasker>(trie, grammar::parse_gbnf(gbnf, wrapped ? kAfterReasoning : "root"), allow_special);
  } catch (const Error& e) {
    invalid(std::string("'") + param + "': " + e.what(), param);
  }
  std::lock_guard<std::mutex> l(mu_);
  lru_.emplace_front(key, m);
  if (lru_.size() > kKeptGrammars) lru_.pop_back();
  return m;
}

ConstraintFactory Constraints::make(const OutputStructure& p, const ojson& tools, const std::string& tool_choice,
                                    const std::string& forced_tool, bool starts_in_reasoning, int64_t max_tokens,
                                    int64_t reasoning_budget) {
  using S = OutputStructure::Kind;
  // The reasoning end tag, forced when a grammar or a reasoning budget needs it.
  auto gate = [&](const char* param) {
    grammar::Gate g;
    g.bytes = tags_for(m_.format).think_end;
    g.id = m_.tokenizer->token_to_id(g.bytes);
    g.budget = reasoning_budget;
    if (g.id < 0)
      invalid(fmt::format("'{}' after reasoning needs '{}' as one token, and this vocabulary has none", param, g.bytes), param);
    return g;
  };
  std::string gbnf;
  const char* param = "response_format";
  bool allow_special = false;
  try {
    if (tool_choice == "required" || tool_choice == "function") {
      param = "tool_choice";
      allow_special = true;  // the block markers are special tokens of the vocabulary
      const std::string only = tool_choice == "function" ? forced_tool : "";
      gbnf = m_.format == OutputFormat::kM3   ? grammar::m3_tool_call_gbnf(tools, only)
             : m_.format == OutputFormat::kM1 ? grammar::m1_tool_call_gbnf(tools, only)
                                                    : grammar::m2_tool_call_gbnf(tools, only);
    } else if (p.kind == S::kJsonObject) {
      gbnf = grammar::json_object_gbnf();
    } else if (p.kind == S::kJsonSchema) {
      gbnf = grammar::json_schema_to_gbnf(p.json_schema);
    } else if (p.kind == S::kGrammar) {
      param = "grammar";
      gbnf = p.grammar;
    } else if (reasoning_budget >= 0 && starts_in_reasoning) {
      grammar::Gate g = gate("thinking");
      std::shared_ptr<const grammar::VocabTrie> t;
      {
        std::lock_guard<std::mutex> l(mu_);
        t = trie("thinking");
      }
      return [t, g] { return std::make_unique<grammar::ReasoningBudget>(t, g); };
    } else {
      return {};
    }
  } catch (const grammar::SchemaError& e) {
    throw ChatError(ChatError::Kind::kUnsupportedSchema,
                    std::string(param == std::string("tool_choice") ? "'tools' parameters: " : "'response_format' schema: ") +
                        e.what() + " (the keyword: '" + e.keyword() + "')",
                    param == std::string("tool_choice") ? "tools" : "response_format");
  } catch (const ChatError&) {
    throw;
  } catch (const Error& e) {
    invalid(std::string("'") + param + "': " + e.what(), param);
  }
  // A prompt that opened the reasoning block: the model thinks freely, then the grammar applies
  // after the end tag (the "\n\n" the template puts there allowed).
  grammar::Gate g;
  if (starts_in_reasoning) {
    g = gate(param);
    gbnf += fmt::format("\n{} ::= [\\n]{{0,2}} root\n", kAfterReasoning);
  }
  std::shared_ptr<grammar::TokenMasker> mk = masker(gbnf, allow_special, param);
  const int64_t need = int64_t(mk->dist(mk->start())) + (g.id >= 0 ? 1 : 0) + 1;  // + the stop token
  if (max_tokens < need)
    invalid(fmt::format("'max_tokens' is {}, and the shortest reply the '{}' allows takes {} tokens", max_tokens, param, need),
            "max_tokens");
  return [mk, g] { return std::make_unique<grammar::GrammarConstraint>(mk, g); };
}

}  // namespace mmx::chat
