// The toy tasks as an RlTask (task_rl.h).
#include "rl/task_rl.h"

#include <map>
#include <memory>
#include <mutex>

#include "base/error.h"
#include "tokenizer/tokenizer.h"

namespace mmx::rl {

TaskSpec task_spec_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) fail("{}: \"task\" must be an object (docs/rl.md)", where);
  TaskSpec s;
  for (const auto& [k, v] : j.items()) {
    try {
      if (k == "kind") s.kind = v.get<std::string>();
      else if (k == "min_len") s.min_len = v.get<int>();
      else if (k == "max_len") s.max_len = v.get<int>();
      else if (k == "letters") s.letters = v.get<int>();
      else if (k == "digits") s.digits = v.get<int>();
      else if (k == "eval_fraction") s.eval_fraction = v.get<double>();
      else fail("{}: unknown task key \"{}\" (kind, min_len, max_len, letters, digits, eval_fraction)", where, k);
    } catch (const nlohmann::json::exception& e) {
      fail("{}: task \"{}\" has the wrong type ({})", where, k, e.what());
    }
  }
  check_task_spec(s);
  return s;
}

RlTask make_rl_task(const TaskSpec& spec, uint64_t seed, const tok::Tokenizer& tk) {
  // Items by prompt: the loop speaks prompts; the checker and the score need the item.
  struct Items {
    std::mutex mu;
    std::map<std::string, TaskItem> by_prompt;
    std::vector<std::string> add(const std::vector<TaskItem>& items) {
      std::lock_guard<std::mutex> l(mu);
      std::vector<std::string> v;
      for (const TaskItem& i : items) {
        by_prompt.emplace(i.prompt, i);
        v.push_back(i.prompt);
      }
      return v;
    }
    TaskItem get(const std::string& p) {
      std::lock_guard<std::mutex> l(mu);
      auto it = by_prompt.find(p);
      if (it == by_prompt.end()) fail("rl: prompt {:?} is not one of this task's", p);
      return it->second;
    }
  };
  auto items = std::make_shared<Items>();
  RlTask t;
  t.train_prompts = [spec, seed, items](int64_t step, int64_t n) {
    return items->add(make_task_items(spec, Split::kTrain, seed * 1000003 + uint64_t(step), n));
  };
  t.eval_prompts = [spec, items](int64_t n) { return items->add(make_task_items(spec, Split::kEval, 777, n, true)); };
  t.checker = [items](const std::string& p, const std::string& c) { return checker_argv(items->get(p), c); };
  t.verdict = [](int status, const std::string& out) { return checker_verdict(status, out); };
  t.score = [items](const std::string& p, const std::string& c) { return score_completion(items->get(p), c); };
  t.batch_checker = [items](const std::vector<std::string>& ps, const std::vector<std::string>& cs) {
    std::vector<TaskItem> its;
    for (const std::string& p : ps) its.push_back(items->get(p));
    return checker_argv_batch(its, cs);
  };
  t.batch_verdicts = [](int status, const std::string& out, size_t n) { return checker_verdicts(status, out, n); };
  t.stop_ids = task_stop_ids(tk);
  return t;
}

}  // namespace mmx::rl
