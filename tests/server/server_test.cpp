// The HTTP server end to end over a scripted FakeEngine: real sockets on 127.0.0.1 (ephemeral
// port), real tokenizer and chat template (the tiny M2 checkpoint), httplib::Client as client.
// The "model" says what the script says; the script is the tiny tokenizer's encoding of the
// text we want, so the output parser sees exactly what a MiniMax model would emit.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "server/request_fields.h"
#include "server_fixture.h"

namespace mmx::server {
namespace {

// ---- basic endpoints ----

TEST_F(ServerTest, HealthModelsMetrics) {
  start();
  httplib::Client c("127.0.0.1", port);
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(json::parse(h->body)["status"], "ok");
  auto m = c.Get("/v1/models");
  ASSERT_TRUE(m);
  json mj = json::parse(m->body);
  EXPECT_EQ(mj["object"], "list");
  EXPECT_EQ(mj["data"][0]["id"], "tiny-m2");
  EXPECT_EQ(mj["data"][0]["max_model_len"], 4096);
  EXPECT_EQ(c.Get("/v1/models/tiny-m2")->status, 200);
  expect_error(c.Get("/v1/models/gpt-4"), 404, "unknown model card");
  post_json("/v1/chat/completions", chat_body());
  expect_error(post("/v1/chat/completions", "{"), 400, "bad JSON");
  const std::vector<const char*> wants = {
      "mmx_requests_total{endpoint=\"chat_completions\",status=\"200\"} 1",
      "mmx_requests_total{endpoint=\"chat_completions\",status=\"400\"} 1",
      "mmx_requests_total{endpoint=\"models\",status=\"404\"} 1", "mmx_prompt_tokens_total ",
      "mmx_generation_tokens_total ", "mmx_time_to_first_token_seconds_bucket{le=\"+Inf\"} 1",
      "mmx_inter_token_latency_seconds_count ", "mmx_prefix_cache_hit_rate 0.25", "mmx_kv_pages_used 3",
      "mmx_kv_pages_total 100", "mmx_requests_running ", "mmx_requests_waiting ", "mmx_last_batch_tokens 1",
      "# TYPE mmx_time_to_first_token_seconds histogram"};
  // A request is counted by httplib's logger just after its answer is written, and each request
  // has its own connection (and thread): the last count may land a moment after the client read
  // the answer, so /metrics is read again until it shows (at most 2 s).
  std::string t;
  for (int i = 0; i < 40; ++i) {
    auto met = c.Get("/metrics");
    ASSERT_TRUE(met);
    EXPECT_EQ(met->status, 200);
    t = met->body;
    if (std::all_of(wants.begin(), wants.end(), [&](const char* w) { return t.find(w) != std::string::npos; })) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (const char* want : wants) EXPECT_NE(t.find(want), std::string::npos) << want << "\n" << t;
}

// ---- chat ----

TEST_F(ServerTest, ChatNonStreamSplitsReasoning) {
  start();
  json r = post_json("/v1/chat/completions", chat_body({{"temperature", 0.5}, {"top_p", 0.9}, {"top_k", 40},
                                                         {"seed", 7}, {"max_tokens", 100}}));
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["model"], "tiny-m2");
  EXPECT_EQ(r["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  const json& ch = r["choices"][0];
  EXPECT_EQ(ch["index"], 0);
  EXPECT_EQ(ch["message"]["role"], "assistant");
  EXPECT_EQ(ch["message"]["reasoning_content"], "Let me think.");
  EXPECT_EQ(ch["message"]["content"], "Hello there, friend!");
  EXPECT_FALSE(ch["message"].contains("tool_calls"));
  EXPECT_EQ(ch["finish_reason"], "stop");
  EXPECT_TRUE(ch["logprobs"].is_null());
  // The engine got the rendered prompt and the sampling parameters.
  auto reqs = engine.requests();
  ASSERT_EQ(reqs.size(), 1u);
  const std::string prompt = TinyAssets::get().decode(reqs[0].prompt);
  EXPECT_NE(prompt.find("]~b]user\nHi[e~["), std::string::npos) << prompt;
  EXPECT_EQ(prompt.substr(prompt.size() - 15), "]~b]ai\n<think>\n");
  EXPECT_FLOAT_EQ(reqs[0].sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(reqs[0].sampling.top_p, 0.9f);
  EXPECT_EQ(reqs[0].sampling.top_k, 40);
  EXPECT_EQ(reqs[0].sampling.seed, 7u);
  EXPECT_EQ(reqs[0].max_tokens, 100);
  EXPECT_EQ(reqs[0].stop_ids, std::vector<int32_t>{TinyAssets::get().eos});
  // Usage: the prompt as submitted, every generated token (the end-of-sequence one included).
  EXPECT_EQ(r["usage"]["prompt_tokens"], reqs[0].prompt.size());
  EXPECT_EQ(r["usage"]["completion_tokens"], engine.script.size());
  EXPECT_EQ(r["usage"]["total_tokens"], reqs[0].prompt.size() + engine.script.size());
  EXPECT_EQ(r["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_FALSE(r["usage"].contains("dropped_reasoning_turns"));  // only with --drop-reasoning-over
}

TEST_F(ServerTest, ChatStreamDeltas) {
  start();
  engine.n_cached = 4;
  auto r = post("/v1/chat/completions",
                chat_body({{"stream", true}, {"stream_options", {{"include_usage", true}}}}).dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  std::vector<json> ev = sse_events(r->body);
  ASSERT_GE(ev.size(), 4u);
  EXPECT_EQ(ev[0]["choices"][0]["delta"]["role"], "assistant");
  std::string reasoning, content, finish;
  int n_content_chunks = 0;
  for (const json& e : ev) {
    EXPECT_EQ(e["object"], "chat.completion.chunk");
    EXPECT_EQ(e["id"], ev[0]["id"]);
    if (e["choices"].empty()) continue;
    const json& d = e["choices"][0]["delta"];
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    if (d.contains("content")) content += d["content"].get<std::string>(), ++n_content_chunks;
    if (!e["choices"][0]["finish_reason"].is_null()) finish = e["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(reasoning, "Let me think.");
  EXPECT_EQ(content, "Hello there, friend!");
  EXPECT_GT(n_content_chunks, 2);  // incremental, not one blob
  EXPECT_EQ(finish, "stop");
  const json& last = ev.back();  // the usage chunk: no choices
  EXPECT_TRUE(last["choices"].empty());
  EXPECT_EQ(last["usage"]["completion_tokens"], engine.script.size());
  EXPECT_EQ(last["usage"]["prompt_tokens_details"]["cached_tokens"], 4);
}

TEST_F(ServerTest, ParallelToolCalls) {
  start();
  engine.script = TinyAssets::get().say(kToolText);
  json r = post_json("/v1/chat/completions", chat_body({{"tools", tools_json()}}));
  const json& msg = r["choices"][0]["message"];
  EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(msg["reasoning_content"], "The user wants two things.");
  EXPECT_TRUE(msg["content"].is_null());
  ASSERT_EQ(msg["tool_calls"].size(), 2u);
  const json& c0 = msg["tool_calls"][0];
  EXPECT_EQ(c0["type"], "function");
  EXPECT_EQ(c0["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(c0["function"]["name"], "get_weather");
  ASSERT_TRUE(c0["function"]["arguments"].is_string());  // a JSON string, typed by the schema
  EXPECT_EQ(json::parse(c0["function"]["arguments"].get<std::string>()), json({{"city", "Paris"}, {"days", 3}}));
  EXPECT_EQ(msg["tool_calls"][1]["function"]["name"], "get_time");
  EXPECT_NE(msg["tool_calls"][1]["id"], c0["id"]);
  // The tools reached the prompt.
  const std::string prompt = TinyAssets::get().decode(engine.requests()[0].prompt);
  EXPECT_NE(prompt.find("<tools>"), std::string::npos);
  EXPECT_NE(prompt.find("get_weather"), std::string::npos);

  // Streamed: the calls arrive in pieces (id, type and name first, then argument fragments as
  // each parameter closes), indexed 0 and 1; joined per index they equal the non-streamed calls.
  auto s = post("/v1/chat/completions", chat_body({{"tools", tools_json()}, {"stream", true}}).dump());
  ASSERT_TRUE(s);
  std::vector<json> joined;  // per index: {"id", "name", "arguments"}
  std::vector<int> n_pieces;
  std::string finish;
  for (const json& e : sse_events(s->body)) {
    if (e["choices"].empty()) continue;
    const json& ch = e["choices"][0];
    if (ch["delta"].contains("tool_calls"))
      for (const json& c : ch["delta"]["tool_calls"]) {
        const size_t i = c["index"].get<size_t>();
        ASSERT_LE(i, joined.size()) << "index skipped: " << c.dump();
        if (i == joined.size()) {  // a call's first piece
          EXPECT_EQ(c["type"], "function") << c.dump();
          EXPECT_EQ(c["id"].get<std::string>().rfind("call_", 0), 0u) << c.dump();
          joined.push_back({{"id", c["id"]}, {"name", c["function"]["name"]}, {"arguments", ""}});
          n_pieces.push_back(0);
        } else {
          EXPECT_FALSE(c.contains("id") || c["function"].contains("name")) << "repeated on a later piece: " << c.dump();
        }
        joined[i]["arguments"] = joined[i]["arguments"].get<std::string>() + c["function"]["arguments"].get<std::string>();
        ++n_pieces[i];
      }
    if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
  }
  ASSERT_EQ(joined.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(joined[i]["name"], msg["tool_calls"][i]["function"]["name"]);
    EXPECT_EQ(joined[i]["arguments"], msg["tool_calls"][i]["function"]["arguments"]);  // byte for byte
  }
  EXPECT_NE(joined[0]["id"], joined[1]["id"]);
  EXPECT_GE(n_pieces[0], 3) << "get_weather's two parameters were not streamed separately";
  EXPECT_EQ(finish, "tool_calls");
}

TEST_F(ServerTest, ToolChoiceNoneRequiredNamedAndHistoryArgumentsAsStrings) {
  start();
  post_json("/v1/chat/completions", chat_body({{"tools", tools_json()}, {"tool_choice", "none"}}));
  std::string prompt = TinyAssets::get().decode(engine.requests().back().prompt);
  EXPECT_EQ(prompt.find("<tools>"), std::string::npos) << "tool_choice none must hide the tools";
  // Forcing a call ("required", a named function) hands the engine a constraint (src/grammar;
  // what it makes the model write is checked in tests/grammar and the structured-output client
  // test); a named function missing from tools, or no tools, is a 400 naming tool_choice.
  for (const json& tc : {json("required"), json({{"type", "function"}, {"function", {{"name", "get_time"}}}})}) {
    post_json("/v1/chat/completions", chat_body({{"tools", tools_json()}, {"tool_choice", tc}}));
    EXPECT_TRUE(bool(engine.requests().back().constraint)) << tc.dump();
  }
  for (const json& body : {chat_body({{"tools", tools_json()}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}}),
                           chat_body({{"tool_choice", "required"}})}) {
    auto r = post("/v1/chat/completions", body.dump());
    expect_error(r, 400, body.dump());
    EXPECT_EQ(json::parse(r->body)["error"]["param"], "tool_choice");
  }
  // An OpenAI-style history: arguments as a JSON string, then the tool result.
  json msgs = json::parse(R"([
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 2}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}])");
  post_json("/v1/chat/completions", {{"messages", msgs}, {"tools", tools_json()}});
  prompt = TinyAssets::get().decode(engine.requests().back().prompt);
  EXPECT_NE(prompt.find("<parameter name=\"city\">Paris</parameter>"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("<response>sunny</response>"), std::string::npos) << prompt;
}

TEST_F(ServerTest, AppendThinkFormat) {
  format = chat::OutputFormat::kM2AppendThink;
  start();
  json r = post_json("/v1/chat/completions", chat_body());
  const json& msg = r["choices"][0]["message"];
  EXPECT_FALSE(msg.contains("reasoning_content"));
  EXPECT_EQ(msg["content"], "<think>Let me think.</think>\n\nHello there, friend!");
}

TEST_F(ServerTest, Logprobs) {
  start();
  engine.script = TinyAssets::get().say("Caf\u00e9 \U0001F642</think>ok");  // multi-byte characters split over tokens
  json r = post_json("/v1/chat/completions", chat_body({{"logprobs", true}, {"top_logprobs", 2}}));
  const json& lp = r["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(lp.size(), engine.script.size());
  EXPECT_EQ(engine.requests()[0].top_logprobs, 2);
  for (size_t i = 0; i < lp.size(); ++i) {
    EXPECT_EQ(lp[i]["token"], TinyAssets::get().decode({engine.script[i]}));
    EXPECT_FLOAT_EQ(lp[i]["logprob"].get<float>(), -0.25f * float(i % 4 + 1));
    ASSERT_EQ(lp[i]["top_logprobs"].size(), 2u);
    EXPECT_TRUE(lp[i]["bytes"].is_array());
  }
  // The bytes of all tokens are exactly the generated text (including the special tokens).
  std::string all;
  for (const json& e : lp)
    for (const json& b : e["bytes"]) all.push_back(char(b.get<int>()));
  EXPECT_EQ(all, TinyAssets::get().decode(engine.script));
  // Streamed: the logprob entries of all chunks add up to every token.
  auto s = post("/v1/chat/completions", chat_body({{"logprobs", true}, {"stream", true}}).dump());
  size_t n = 0;
  for (const json& e : sse_events(s->body))
    if (!e["choices"].empty() && e["choices"][0]["logprobs"].is_object())
      n += e["choices"][0]["logprobs"]["content"].size();
  EXPECT_EQ(n, engine.script.size());
}

TEST_F(ServerTest, StopStrings) {
  engine.token_delay_ms = 2;  // still generating when the stop string is seen
  start();
  json r = post_json("/v1/chat/completions", chat_body({{"stop", "there"}}));
  EXPECT_EQ(r["choices"][0]["message"]["content"], "Hello ");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  r = post_json("/v1/chat/completions", chat_body({{"stop", {"zzz", ", fr"}}, {"stream", false}}));
  EXPECT_EQ(r["choices"][0]["message"]["content"], "Hello there");
  // Streamed, and a stop string spanning several tokens.
  auto s = post("/v1/chat/completions", chat_body({{"stop", {"there, friend"}}, {"stream", true}}).dump());
  std::string content;
  for (const json& e : sse_events(s->body))
    if (!e["choices"].empty() && e["choices"][0]["delta"].contains("content"))
      content += e["choices"][0]["delta"]["content"].get<std::string>();
  EXPECT_EQ(content, "Hello ");
  EXPECT_GE(engine.n_cancelled(), 1) << "a stop string cancels the engine request";
  // A stop string that never occurs changes nothing.
  r = post_json("/v1/chat/completions", chat_body({{"stop", {"Hello world"}}}));
  EXPECT_EQ(r["choices"][0]["message"]["content"], "Hello there, friend!");
}

TEST_F(ServerTest, MaxTokensLength) {
  start();
  json r = post_json("/v1/chat/completions", chat_body({{"max_completion_tokens", 3}}));
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r["usage"]["completion_tokens"], 3);
  EXPECT_EQ(engine.requests()[0].max_tokens, 3);
}

// A request without a seed gets a fresh one from the server's RNG (two such requests sample
// differently); with --seed the server's draws repeat across restarts; penalties, logit_bias,
// min_tokens and ignore_eos reach the engine; what a request omits comes from the served
// model's defaults (generation_config.json).
TEST_F(ServerTest, SeedsPenaltiesAndDefaults) {
  SamplingParams defaults;
  defaults.temperature = 0.6f, defaults.top_p = 0.95f, defaults.top_k = 40;
  sampling_defaults = defaults;
  start();
  post_json("/v1/chat/completions", chat_body());
  post_json("/v1/chat/completions", chat_body());
  post_json("/v1/completions", {{"prompt", "Hi"}});
  post_json("/v1/chat/completions",
            chat_body({{"temperature", 1.0}, {"presence_penalty", 0.5}, {"frequency_penalty", -0.25},
                       {"repetition_penalty", 1.1}, {"logit_bias", {{"5", -100}, {"7", 2.5}}}, {"min_tokens", 3},
                       {"ignore_eos", true}}));
  auto reqs = engine.requests();
  ASSERT_EQ(reqs.size(), 4u);
  EXPECT_NE(reqs[0].sampling.seed, reqs[1].sampling.seed);
  EXPECT_NE(reqs[1].sampling.seed, reqs[2].sampling.seed);
  for (int i = 0; i < 3; ++i) {
    EXPECT_FLOAT_EQ(reqs[size_t(i)].sampling.temperature, 0.6f);
    EXPECT_FLOAT_EQ(reqs[size_t(i)].sampling.top_p, 0.95f);
    EXPECT_EQ(reqs[size_t(i)].sampling.top_k, 40);
    EXPECT_FALSE(reqs[size_t(i)].ignore_eos);
  }
  const SamplingParams& q = reqs[3].sampling;
  EXPECT_FLOAT_EQ(q.temperature, 1.0f);
  EXPECT_FLOAT_EQ(q.top_p, 0.95f);  // not given: the default
  EXPECT_FLOAT_EQ(q.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(q.frequency_penalty, -0.25f);
  EXPECT_FLOAT_EQ(q.repetition_penalty, 1.1f);
  ASSERT_EQ(q.logit_bias.size(), 2u);
  EXPECT_EQ(q.logit_bias[0], (std::pair<int32_t, float>{5, -100.0f}));
  EXPECT_EQ(q.logit_bias[1], (std::pair<int32_t, float>{7, 2.5f}));
  EXPECT_EQ(q.min_tokens, 3);
  EXPECT_TRUE(reqs[3].ignore_eos);
  EXPECT_TRUE(reqs[3].stop_ids.empty());  // ignore_eos: the eos is no stop id
  // --seed: a restarted server draws the same seeds for the same requests.
  auto seeds_of = [&](uint64_t seed) {
    FakeEngine fe;
    fe.script = engine.script;
    ServerOptions so = opts;
    so.seed = seed;
    chat::ServedModel m;
    m.name = "tiny-m2";
    m.tokenizer = TinyAssets::get().tok.get();
    m.chat_template = TinyAssets::get().tmpl.get();
    m.eos_ids = {TinyAssets::get().eos};
    Server srv(fe, m, so);
    const int p = srv.start("127.0.0.1", 0);
    httplib::Client c("127.0.0.1", p);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(c.Post("/v1/chat/completions", chat_body().dump(), "application/json")->status, 200);
    srv.stop();
    std::vector<uint64_t> out;
    for (const GenRequest& r : fe.requests()) out.push_back(r.sampling.seed);
    return out;
  };
  EXPECT_EQ(seeds_of(11), seeds_of(11));
  EXPECT_NE(seeds_of(11), seeds_of(12));
}

TEST_F(ServerTest, NChoices) {
  start();
  json r = post_json("/v1/chat/completions", chat_body({{"n", 2}, {"seed", 10}}));
  ASSERT_EQ(r["choices"].size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(r["choices"][i]["index"], i);
    EXPECT_EQ(r["choices"][i]["message"]["content"], "Hello there, friend!");
  }
  EXPECT_EQ(r["usage"]["completion_tokens"], 2 * engine.script.size());
  auto reqs = engine.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_NE(reqs[0].sampling.seed, reqs[1].sampling.seed);  // independent samples
  // Streamed: both indices finish.
  auto s = post("/v1/chat/completions", chat_body({{"n", 2}, {"stream", true}}).dump());
  std::set<int> finished;
  std::string content[2];
  for (const json& e : sse_events(s->body)) {
    const json& ch = e["choices"][0];
    if (ch["delta"].contains("content")) content[ch["index"].get<int>()] += ch["delta"]["content"].get<std::string>();
    if (!ch["finish_reason"].is_null()) finished.insert(ch["index"].get<int>());
  }
  EXPECT_EQ(finished, (std::set<int>{0, 1}));
  EXPECT_EQ(content[0], "Hello there, friend!");
  EXPECT_EQ(content[1], "Hello there, friend!");
}

// ---- completions ----

TEST_F(ServerTest, Completions) {
  start();
  engine.script = TinyAssets::get().say(" world and more");
  json r = post_json("/v1/completions", {{"model", "tiny-m2"}, {"prompt", "Hello"}, {"logprobs", 1}});
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["choices"][0]["text"], " world and more");  // no output parsing, EOS not shown
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  const json& lp = r["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"].size(), engine.script.size());
  EXPECT_EQ(lp["text_offset"][0], 0);
  EXPECT_EQ(TinyAssets::get().decode(engine.requests()[0].prompt), "Hello");
  r = post_json("/v1/completions", {{"prompt", {1, 2, 3}}, {"max_tokens", 2}});
  EXPECT_EQ(engine.requests().back().prompt, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  auto s = post("/v1/completions", json({{"prompt", "Hello"}, {"stream", true}}).dump());
  std::string text;
  for (const json& e : sse_events(s->body)) text += e["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, " world and more");
  // A stop-string prefix at the end of the generation is released, not swallowed.
  engine.script = TinyAssets::get().say(" Hello wor");
  r = post_json("/v1/completions", {{"prompt", "x"}, {"stop", "world"}});
  EXPECT_EQ(r["choices"][0]["text"], " Hello wor");
  r = post_json("/v1/completions", {{"prompt", "x"}, {"stop", {"lo w", "Hel"}}});
  EXPECT_EQ(r["choices"][0]["text"], " ");  // the earliest match wins
  expect_error(post("/v1/completions", json({{"prompt", {1, 99999}}}).dump()), 400, "id outside vocab");
  expect_error(post("/v1/completions", json({{"prompt", 5}}).dump()), 400, "prompt number");
  expect_error(post("/v1/completions", json({{"prompt", ""}}).dump()), 400, "empty prompt");
}

// ---- authentication, refusals, disconnects ----

TEST_F(ServerTest, ApiKey) {
  opts.api_keys = {"sekrit"};
  start();
  expect_error(post("/v1/chat/completions", chat_body().dump()), 401, "no key");
  expect_error(post("/v1/chat/completions", chat_body().dump(), {{"Authorization", "Bearer wrong"}}), 401, "bad key");
  httplib::Client c("127.0.0.1", port);
  expect_error(c.Get("/v1/models"), 401, "models without key");
  auto ok = post("/v1/chat/completions", chat_body().dump(), {{"Authorization", "Bearer sekrit"}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(c.Get("/health")->status, 200);  // probes need no key
  expect_error(c.Get("/metrics"), 401, "metrics without key");
  expect_error(post("/tokenize", R"({"content": "Hi"})"), 401, "tokenize without key");
  expect_error(post("/v1/chat/completions", chat_body().dump(), {{"Authorization", "Bearer sekri"}}), 401, "key prefix");
  expect_error(post("/v1/chat/completions", chat_body().dump(), {{"Authorization", "Bearer sekritt"}}), 401, "key + 1");
  EXPECT_EQ(c.Get("/metrics", {{"Authorization", "Bearer sekrit"}})->status, 200);
  EXPECT_TRUE(engine.requests().size() == 1u);
}

TEST_F(ServerTest, TokenizeDetokenize) {
  start();
  const tok::Tokenizer& tok = *TinyAssets::get().tok;
  const std::string text = "Hello there, friend!";
  json r = post_json("/tokenize", {{"content", text}});
  std::vector<int32_t> ids = r["tokens"].get<std::vector<int32_t>>();
  EXPECT_EQ(ids, tok.encode(text));
  EXPECT_FALSE(ids.empty());
  EXPECT_EQ(post_json("/detokenize", {{"tokens", ids}})["content"], text);
  // A special-token string: one id with parse_special (the default), text bytes without.
  const std::string sp = tok.id_to_token(TinyAssets::get().eos);
  ASSERT_FALSE(sp.empty());
  EXPECT_EQ(post_json("/tokenize", {{"content", sp}})["tokens"].size(), 1u);
  EXPECT_GT(post_json("/tokenize", {{"content", sp}, {"parse_special", false}})["tokens"].size(), 1u);
  expect_error(post("/tokenize", R"({"content": 5})"), 400, "content number");
  expect_error(post("/tokenize", R"({"content": "x", "with_pieces": true})"), 400, "unknown field");
  expect_error(post("/tokenize", R"({"content": "x", "add_special": true, "parse_special": false})"), 400,
               "add_special without parse_special");
  expect_error(post("/detokenize", R"({"tokens": [-1]})"), 400, "negative id");
  expect_error(post("/detokenize", R"({"tokens": [99999999]})"), 400, "id outside the vocabulary");
  expect_error(post("/detokenize", R"({"tokens": "abc"})"), 400, "tokens string");
  EXPECT_TRUE(engine.requests().empty());
}

TEST_F(ServerTest, CorsOrigin) {
  opts.cors_origin = "http://localhost:3000";
  opts.api_keys = {"k"};
  start();
  httplib::Client c("127.0.0.1", port);
  auto pre = c.Options("/v1/chat/completions");  // a preflight carries no key
  ASSERT_TRUE(pre);
  EXPECT_EQ(pre->status, 204);
  EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Origin"), "http://localhost:3000");
  EXPECT_NE(pre->get_header_value("Access-Control-Allow-Headers").find("Authorization"), std::string::npos);
  auto r = post("/v1/chat/completions", chat_body().dump(), {{"Authorization", "Bearer k"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), "http://localhost:3000");
}

TEST_F(ServerTest, NoCorsHeadersUnlessAsked) {
  start();
  auto r = post("/v1/chat/completions", chat_body().dump());
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->has_header("Access-Control-Allow-Origin"));
}

TEST_F(ServerTest, QueueFullIs429) {
  engine.max_in_flight = 0;
  start();
  expect_error(post("/v1/chat/completions", chat_body().dump()), 429, "non-stream");
  expect_error(post("/v1/chat/completions", chat_body({{"stream", true}}).dump()), 429, "stream");
  auto r = json::parse(post("/v1/chat/completions", chat_body().dump())->body);
  EXPECT_EQ(r["error"]["type"], "rate_limit_error");
}

// Raw socket: send a streaming request, read the first bytes, hang up.
void stream_and_hang_up(int port, const std::string& body) {
  const int fd = connect_loopback(port);
  ASSERT_GE(fd, 0);
  const std::string req = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(send(fd, req.data(), req.size(), 0), ssize_t(req.size()));
  char buf[512];
  ASSERT_GT(recv(fd, buf, sizeof buf, 0), 0);  // headers / first chunk arrived: it is streaming
  close(fd);
}

// A burst of connections far larger than the HTTP thread pool and httplib's compiled-in listen
// backlog (5): every one is answered. Honest note: with the backlog left at 5 this test still
// passes here, in ~18 s instead of ~60 ms (the kernel's retransmissions rescue a serial client);
// the lost requests needed the load bench's 64 concurrent clients (bench/serving/README.md).
TEST_F(ServerTest, ConnectionBurstIsAnswered) {
  opts.front.max_handlers = 2;
  start();
  std::vector<int> fds;
  for (int i = 0; i < 200; ++i) {
    const int fd = connect_loopback(port);
    ASSERT_GE(fd, 0);
    const std::string req = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    ASSERT_EQ(send(fd, req.data(), req.size(), 0), ssize_t(req.size()));
    fds.push_back(fd);
  }
  int answered = 0;
  for (int fd : fds) {
    timeval tv{10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[64] = {};
    if (recv(fd, buf, sizeof buf - 1, 0) > 0 && std::string(buf).rfind("HTTP/1.1 200", 0) == 0) ++answered;
    close(fd);
  }
  EXPECT_EQ(answered, 200);
}

TEST_F(ServerTest, ClientDisconnectCancels) {
  engine.token_delay_ms = 20;
  std::vector<int32_t> longer;
  for (int i = 0; i < 200; ++i) longer.push_back(TinyAssets::get().tok->encode(" la", false)[0]);
  engine.script = longer;
  start();
  stream_and_hang_up(port, chat_body({{"stream", true}}).dump());
  for (int i = 0; i < 200 && engine.n_cancelled() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  EXPECT_EQ(engine.n_cancelled(), 1);
  EXPECT_EQ(engine.n_in_flight(), 0);
}

TEST_F(ServerTest, EngineFailure) {
  engine.fail_after = 3;
  start();
  auto r = post("/v1/chat/completions", chat_body().dump());
  expect_error(r, 500, "engine error, whole");
  // Streaming: the 200 is already out after the first token, so the error comes in-band.
  auto s = post("/v1/chat/completions", chat_body({{"stream", true}}).dump());
  ASSERT_TRUE(s);
  EXPECT_EQ(s->status, 200);
  std::vector<json> ev = sse_events(s->body);
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev.back()["error"]["message"], "the engine failed");
  engine.fail_after = 0;  // before any token: a proper status even when streaming
  expect_error(post("/v1/chat/completions", chat_body({{"stream", true}}).dump()), 500, "engine error, stream");
}

TEST_F(ServerTest, SlowStreamsGetKeepAlives) {
  engine.token_delay_ms = 60;
  engine.script = TinyAssets::get().say("Hi</think>ok");
  opts.stream_ping_ms = 10;
  start();
  auto s = post("/v1/chat/completions", chat_body({{"stream", true}}).dump());
  ASSERT_TRUE(s);
  EXPECT_NE(s->body.find(": ping\n\n"), std::string::npos);
  std::string content;
  for (const json& e : sse_events(s->body))
    if (!e["choices"].empty() && e["choices"][0]["delta"].contains("content"))
      content += e["choices"][0]["delta"]["content"].get<std::string>();
  EXPECT_EQ(content, "ok");
}

TEST_F(ServerTest, ConcurrentStreams) {
  engine.token_delay_ms = 2;
  start();
  std::vector<std::thread> ts;
  std::atomic<int> ok{0};
  for (int t = 0; t < 12; ++t)
    ts.emplace_back([&, t] {
      httplib::Client c("127.0.0.1", port);
      c.set_read_timeout(20, 0);
      auto r = c.Post("/v1/chat/completions", chat_body({{"stream", t % 2 == 0}, {"seed", t}}).dump(), "application/json");
      const bool stream = t % 2 == 0;  // streamed text is split over chunks
      if (r && r->status == 200 && r->body.find(stream ? "data: [DONE]" : "Hello there, friend!") != std::string::npos)
        ++ok;
      else std::printf("t=%d err=%d status=%d body=%s\n", t, r ? 0 : int(r.error()), r ? r->status : 0, r ? r->body.substr(0, 300).c_str() : "");
    });
  for (std::thread& t : ts) t.join();
  EXPECT_EQ(ok, 12);
  EXPECT_EQ(engine.requests().size(), 12u);
}

TEST_F(ServerTest, DisconnectBetweenSlowTokensIsNoticedByKeepAlives) {
  engine.token_delay_ms = 1500;  // a slow decode step
  engine.script = std::vector<int32_t>(10, TinyAssets::get().tok->encode(" la", false)[0]);
  opts.stream_ping_ms = 20;
  start();
  stream_and_hang_up(port, chat_body({{"stream", true}}).dump());  // returns after the first token
  const auto t0 = std::chrono::steady_clock::now();
  while (engine.n_cancelled() == 0 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(engine.n_cancelled(), 1);
  EXPECT_LT(waited, 1.0) << "cancelled only at the next token, not by the keep-alive writes";
}

// ---- every malformed input: the right status, the error JSON, and a healthy server after ----

TEST_F(ServerTest, MalformedInputs) {
  engine.context = 300;  // "Hi" renders to ~100 tokens with the tiny tokenizer
  start();
  const std::string chat = "/v1/chat/completions";
  expect_error(post(chat, "{\"messages\": [}"), 400, "bad JSON");
  expect_error(post(chat, ""), 400, "empty body");
  expect_error(post(chat, "[1, 2]"), 400, "not an object");
  expect_error(post(chat, "{\"messages\": " + std::string(1 << 20, '[') + std::string(1 << 20, ']') + "}"), 400,
               "nested a million deep");
  expect_error(post(chat, "{\"messages\": [{\"role\": \"user\", \"content\": \"\\udc00\"}]}"), 400,
               "lone surrogate escape");
  expect_error(post(chat, "{\"messages\": [{\"role\": \"user\", \"content\": \"\xff\xfe\"}]}"), 400, "invalid UTF-8");
  expect_error(post(chat, json({{"model", "tiny-m2"}}).dump()), 400, "no messages");
  expect_error(post(chat, json({{"messages", "hi"}}).dump()), 400, "messages string");
  expect_error(post(chat, json({{"messages", json::array()}}).dump()), 400, "messages empty");
  expect_error(post(chat, json({{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}).dump()), 400, "unknown role");
  expect_error(post(chat, json({{"messages", {{{"role", "user"}, {"content", 5}}}}}).dump()), 400, "content number");
  expect_error(post(chat, json({{"messages", {{{"content", "x"}}}}}).dump()), 400, "no role");
  expect_error(post(chat, chat_body({{"temperature", "hot"}}).dump()), 400, "temperature string");
  expect_error(post(chat, chat_body({{"temperature", -0.5}}).dump()), 400, "temperature < 0");
  expect_error(post(chat, chat_body({{"top_p", 0}}).dump()), 400, "top_p 0");
  expect_error(post(chat, chat_body({{"top_p", 1.5}}).dump()), 400, "top_p > 1");
  expect_error(post(chat, chat_body({{"max_tokens", -5}}).dump()), 400, "negative max_tokens");
  expect_error(post(chat, chat_body({{"max_tokens", 0}}).dump()), 400, "zero max_tokens");
  expect_error(post(chat, chat_body({{"max_tokens", 1.5}}).dump()), 400, "fractional max_tokens");
  {  // a tool result before any tool call: our message, not the chat template's
    auto r = post(chat, json({{"messages", {{{"role", "tool"}, {"tool_call_id", "call_x"}, {"content", "42"}}}}}).dump());
    expect_error(r, 400, "tool result without a call");
    EXPECT_NE(r->body.find("no earlier assistant message made a tool call"), std::string::npos) << r->body;
  }
  {  // 2^63 is past int64: "too large", not "must be at least 1" (it used to wrap negative)
    auto r = post(chat, chat_body({{"max_tokens", uint64_t(1) << 63}}).dump());
    expect_error(r, 400, "max_tokens 2^63");
    EXPECT_NE(r->body.find("too large"), std::string::npos) << r->body;
  }
  expect_error(post(chat, chat_body({{"n", 0}}).dump()), 400, "n 0");
  expect_error(post(chat, chat_body({{"n", 17}}).dump()), 400, "n 17");
  expect_error(post(chat, chat_body({{"stream", "yes"}}).dump()), 400, "stream string");
  expect_error(post(chat, chat_body({{"stop", 3}}).dump()), 400, "stop number");
  expect_error(post(chat, chat_body({{"stop", {""}}}).dump()), 400, "stop empty");
  expect_error(post(chat, chat_body({{"tools", "x"}}).dump()), 400, "tools string");
  expect_error(post(chat, chat_body({{"tool_choice", "maybe"}}).dump()), 400, "tool_choice word");
  expect_error(post(chat, chat_body({{"top_logprobs", 30}, {"logprobs", true}}).dump()), 400, "top_logprobs 30");
  expect_error(post(chat, chat_body({{"seed", "x"}}).dump()), 400, "seed string");
  expect_error(post(chat, chat_body({{"presence_penalty", 3}}).dump()), 400, "presence_penalty 3");
  expect_error(post(chat, chat_body({{"frequency_penalty", -2.5}}).dump()), 400, "frequency_penalty -2.5");
  expect_error(post(chat, chat_body({{"repetition_penalty", 0}}).dump()), 400, "repetition_penalty 0");
  expect_error(post(chat, chat_body({{"logit_bias", {{"abc", 1}}}}).dump()), 400, "logit_bias key");
  expect_error(post(chat, chat_body({{"logit_bias", {{"5", 200}}}}).dump()), 400, "logit_bias value");
  expect_error(post(chat, chat_body({{"logit_bias", {{"99999999", 1}}}}).dump()), 400, "logit_bias id outside the vocab");
  expect_error(post(chat, chat_body({{"min_tokens", -1}}).dump()), 400, "min_tokens -1");
  expect_error(post(chat, chat_body({{"ignore_eos", 1}}).dump()), 400, "ignore_eos number");
  // A template-level refusal: a tool result with no assistant tool call before it.
  expect_error(post(chat, json({{"messages", {{{"role", "tool"}, {"content", "x"}}}}}).dump()), 400, "template raise");
  // Unknown model -> 404 with code model_not_found.
  auto um = post(chat, chat_body({{"model", "gpt-4"}}).dump());
  expect_error(um, 404, "unknown model");
  EXPECT_EQ(json::parse(um->body)["error"]["code"], "model_not_found");
  // Prompt over the context (300 tokens here).
  auto big = post(chat, chat_body({{"messages", {{{"role", "user"}, {"content", std::string(3000, 'a')}}}}}).dump());
  expect_error(big, 400, "prompt over context");
  EXPECT_EQ(json::parse(big->body)["error"]["code"], "context_length_exceeded");
  // Huge body: over the 8 MiB limit.
  expect_error(post(chat, std::string(9 << 20, ' ')), 413, "huge body");
  // Unknown routes and methods.
  httplib::Client c("127.0.0.1", port);
  expect_error(c.Get("/v2/nothing"), 404, "unknown route");
  auto wrong = c.Get("/v1/chat/completions");
  expect_error(wrong, 405, "GET on a POST route");
  EXPECT_EQ(wrong->get_header_value("Allow"), "POST");
  expect_error(post("/health", "{}"), 405, "POST on a GET route");
  expect_error(post("/v1/embeddings", "{}"), 404, "unsupported endpoint");
  EXPECT_TRUE(engine.requests().empty()) << "no malformed request may reach the engine";
  // Still serving.
  json r = post_json(chat, chat_body());
  EXPECT_EQ(r["choices"][0]["message"]["content"], "Hello there, friend!");
}

// Every top-level field of request_fields.h's table, per endpoint: honoured and no-effect fields
// are accepted, a default-only field at its default is accepted and at another value is 400
// naming it, a refused field is 400 naming it, and a field in no set is 400 naming it.
TEST_F(ServerTest, EveryFieldIsHonouredOrRefusedByName) {
  start();
  struct Case {
    const char* field;
    json ok;   // null: no accepted value
    json bad;  // null: no refused value
  };
  const Case chat_cases[] = {
      {"user", "u-1", nullptr},
      {"safety_identifier", "s-1", nullptr},
      {"metadata", {{"k", "v"}}, nullptr},
      {"prompt_cache_key", "pk", nullptr},
      {"prediction", {{"type", "content"}, {"content", "x"}}, nullptr},
      {"store", false, true},
      {"service_tier", "auto", "flex"},
      {"parallel_tool_calls", false, "no"},  // honoured: false ends a choice after one call
      {"modalities", {"text"}, {"text", "audio"}},
      {"response_format", {{"type", "json_object"}}, {{"type", "yaml"}}},
      {"grammar", "root ::= \"yes\" | \"no\"", "root ::= undefined-rule"},
      {"reasoning_effort", "low", "extreme"},  // no switch in the M2 template: a stated no-op
      {"verbosity", nullptr, "low"},
      {"audio", nullptr, {{"voice", "alloy"}}},
      {"web_search_options", nullptr, json::object()},
      {"functions", nullptr, json::array()},
      {"function_call", nullptr, "auto"},
      {"stream_options", {{"include_usage", true}}, {{"include_obfuscation", true}}},
      {"frobnicate", nullptr, 1},
  };
  const std::string chat = "/v1/chat/completions";
  for (const Case& c : chat_cases) {
    if (!c.ok.is_null()) {
      auto r = post(chat, chat_body({{c.field, c.ok}}).dump());
      ASSERT_TRUE(r);
      EXPECT_EQ(r->status, 200) << c.field << " = " << c.ok.dump() << ": " << r->body;
    }
    if (!c.bad.is_null()) {
      auto r = post(chat, chat_body({{c.field, c.bad}}).dump());
      expect_error(r, 400, std::string(c.field) + " = " + c.bad.dump());
      EXPECT_EQ(json::parse(r->body)["error"]["param"], c.field) << r->body;
    }
  }
  const Case completion_cases[] = {
      {"user", "u-1", nullptr}, {"best_of", 1, 3}, {"echo", false, true}, {"suffix", "", "end"},
      {"messages", nullptr, json::array()},  // a chat field is unknown here
      {"frobnicate", nullptr, 1},
  };
  for (const Case& c : completion_cases) {
    json b = {{"prompt", "Hi"}, {"max_tokens", 4}};
    if (!c.ok.is_null()) {
      b[c.field] = c.ok;
      auto r = post("/v1/completions", b.dump());
      ASSERT_TRUE(r);
      EXPECT_EQ(r->status, 200) << c.field << ": " << r->body;
    }
    if (!c.bad.is_null()) {
      b[c.field] = c.bad;
      auto r = post("/v1/completions", b.dump());
      expect_error(r, 400, std::string(c.field) + " = " + c.bad.dump());
      EXPECT_EQ(json::parse(r->body)["error"]["param"], c.field) << r->body;
    }
  }
  // The table itself: every honoured field is parsed (a wrong type is 400 naming it), so no
  // honoured entry is a silent ignore.
  for (Endpoint e : {Endpoint::kChat, Endpoint::kCompletion})
    for (const FieldRule& f : field_rules(e)) {
      if (f.kind != FieldRule::kHonoured) continue;
      json b = e == Endpoint::kChat ? chat_body() : json({{"prompt", "Hi"}, {"max_tokens", 4}});
      b[f.name] = json::array({json::object({{"not", "valid"}})});
      auto r = post(e == Endpoint::kChat ? chat : "/v1/completions", b.dump());
      expect_error(r, 400, f.name + " with a wrong type");
      EXPECT_EQ(json::parse(r->body)["error"]["param"], f.name) << r->body;
    }
  // Still serving.
  EXPECT_EQ(post_json(chat, chat_body())["choices"][0]["message"]["content"], "Hello there, friend!");
}

// ---- agent-harness context management ----

TEST_F(ServerTest, DropReasoningOverThreshold) {
  // Measured with the tiny tokenizer: 667 prompt tokens with both reasoning texts, ~456 with
  // one, 244 with none. Threshold 0.5 x 1000 = 500: exactly the oldest one must go.
  opts.drop_reasoning_over = 0.5;
  engine.context = 1000;
  start();
  const std::string r1(200, 'x'), r2(200, 'y');
  json msgs = {{{"role", "user"}, {"content", "Plan a trip"}},
               {{"role", "assistant"}, {"content", ""}, {"reasoning_content", "first " + r1},
                {"tool_calls", {{{"id", "c1"}, {"type", "function"},
                                 {"function", {{"name", "get_time"}, {"arguments", "{\"tz\": \"CET\"}"}}}}}}},
               {{"role", "tool"}, {"content", "12:00"}},
               {{"role", "assistant"}, {"content", ""}, {"reasoning_content", "second " + r2},
                {"tool_calls", {{{"id", "c2"}, {"type", "function"},
                                 {"function", {{"name", "get_time"}, {"arguments", "{\"tz\": \"UTC\"}"}}}}}}},
               {{"role", "tool"}, {"content", "11:00"}}};
  json r = post_json("/v1/chat/completions", {{"messages", msgs}});
  const json& u = r["usage"];
  EXPECT_EQ(u["dropped_reasoning_turns"], 1);
  EXPECT_LT(u["prompt_tokens"].get<int>(), u["prompt_tokens_before_drop"].get<int>());
  const std::string prompt = TinyAssets::get().decode(engine.requests().back().prompt);
  EXPECT_EQ(prompt.find("first xxx"), std::string::npos) << "the oldest reasoning goes first";
  EXPECT_NE(prompt.find("second yyy"), std::string::npos) << "the newer reasoning stays";
  EXPECT_LE(u["prompt_tokens"].get<int>(), 500);
  EXPECT_GT(u["prompt_tokens_before_drop"].get<int>(), 500);
  // Under the threshold nothing is dropped.
  r = post_json("/v1/chat/completions", chat_body());
  EXPECT_EQ(r["usage"]["dropped_reasoning_turns"], 0);
  EXPECT_EQ(r["usage"]["prompt_tokens_before_drop"], r["usage"]["prompt_tokens"]);
}

}  // namespace
}  // namespace mmx::server
