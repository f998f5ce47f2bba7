// Rollouts over EngineApi and the weight push (rl/rollout.h).
#include "rl/rollout.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "base/clock.h"
#include "base/error.h"

namespace mmx::rl {

uint64_t sample_seed(uint64_t seed, int g) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (uint64_t(uint32_t(g)) + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

bool samples_raw_policy(const SamplingParams& p) {
  return p.temperature == 1.0f && p.top_k == 0 && p.top_p >= 1.0f && p.min_p <= 0.0f && p.presence_penalty == 0 &&
         p.frequency_penalty == 0 && p.repetition_penalty == 1.0f && p.logit_bias.empty() && p.min_tokens == 0;
}

namespace {

// What one sample's events fill in (under the run's mutex: they arrive on the engine thread).
struct Slot {
  Rollout r;
  uint64_t id = 0;
  bool submitted = false, done = false;
};

}  // namespace

std::vector<Rollout> Rollouts::run(const std::vector<RolloutRequest>& requests) {
  const double t0 = now_s();
  std::vector<Slot> slots;
  for (size_t i = 0; i < requests.size(); ++i) {
    const RolloutRequest& q = requests[i];
    if (q.prompt.empty()) fail("rollout request {}: the prompt is empty", i);
    if (q.group < 1) fail("rollout request {}: group {} (give at least 1 sample a prompt)", i, q.group);
    if (q.max_tokens < 1) fail("rollout request {}: max_tokens {} (give at least 1)", i, q.max_tokens);
    for (int g = 0; g < q.group; ++g) {
      Slot s;
      s.r.prompt_index = int32_t(i);
      s.r.sample_index = int32_t(g);
      s.r.prompt = q.prompt;
      slots.push_back(std::move(s));
    }
  }
  std::mutex mu;
  std::condition_variable cv;
  int64_t outstanding = 0;
  std::string error;
  // At most max_queued() in flight: our own submits never meet a full queue.
  const int64_t cap = std::max<int64_t>(1, engine_.max_queued());
  for (Slot& s : slots) {
    {
      std::unique_lock<std::mutex> l(mu);
      cv.wait(l, [&] { return outstanding < cap || !error.empty(); });
      if (!error.empty()) break;
      ++outstanding;
      s.submitted = true;
    }
    const RolloutRequest& q = requests[size_t(s.r.prompt_index)];
    GenRequest g;
    g.prompt = q.prompt;
    g.sampling = q.sampling;
    g.sampling.seed = sample_seed(q.seed, s.r.sample_index);
    g.max_tokens = q.max_tokens;
    g.stop_ids = q.stop_ids;
    g.ignore_eos = q.ignore_eos;
    g.logprobs = true;
    const uint64_t id = engine_.submit(std::move(g), [&, slot = &s](const GenEvent& e) {
      std::lock_guard<std::mutex> l(mu);
      if (e.kind == GenEvent::kToken) {
        slot->r.completion.push_back(e.token);
        slot->r.logprobs.push_back(double(e.logprob));
        return;
      }
      if (e.kind == GenEvent::kDone) {
        slot->r.finish_reason = e.finish_reason;
        slot->r.n_cached = e.n_cached;
      } else if (error.empty()) {
        error = fmt::format("rollout of request {} sample {}: the engine refused: {}", slot->r.prompt_index,
                            slot->r.sample_index, e.error);
      }
      slot->done = true;
      --outstanding;
      cv.notify_all();
    });
    std::lock_guard<std::mutex> l(mu);
    s.id = id;
  }
  {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return outstanding == 0 || !error.empty(); });
  }
  if (!error.empty()) {
    for (Slot& s : slots) {
      std::unique_lock<std::mutex> l(mu);
      if (!s.submitted || s.done) continue;
      l.unlock();  // cancel() may wait for the engine, whose events take mu
      engine_.cancel(s.id);
    }
    fail("{}", error);
  }
  std::vector<Rollout> out;
  out.reserve(slots.size());
  stats_ = {};
  for (Slot& s : slots) {
    stats_.prompt_tokens += int64_t(s.r.prompt.size());
    stats_.cached_tokens += s.r.n_cached;
    stats_.generated_tokens += int64_t(s.r.completion.size());
    out.push_back(std::move(s.r));
  }
  stats_.samples = int64_t(out.size());
  stats_.wall_s = now_s() - t0;
  return out;
}

std::vector<TensorValues> tensor_values(const train::ParamSet<float>& P) {
  std::vector<TensorValues> v;
  v.reserve(P.infos.size());
  for (const train::ParamInfo& i : P.infos)
    v.push_back({i.name, std::span<const float>(P.value.data() + i.offset, size_t(i.numel))});
  return v;
}

void push_weights(EngineApi& engine, const train::ParamSet<float>& P) {
  const std::vector<TensorValues> v = tensor_values(P);
  engine.update_weights(v);
}

void push_weights(EngineApi& engine, const train::ParamSet<double>& P) {
  const std::vector<float> f(P.value.begin(), P.value.end());
  std::vector<TensorValues> v;
  v.reserve(P.infos.size());
  for (const train::ParamInfo& i : P.infos)
    v.push_back({i.name, std::span<const float>(f.data() + i.offset, size_t(i.numel))});
  engine.update_weights(v);
}

}  // namespace mmx::rl
