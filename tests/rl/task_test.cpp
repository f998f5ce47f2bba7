// The toy RL tasks (rl/task.h):
//   * items are a pure function of (spec, split, seed, n), and right (answers recomputed here);
//   * the held-out split is disjoint from the training split (add: a+b and b+a share a split),
//     whatever the seed, and holds about eval_fraction of the item space;
//   * score_completion on hand cases (the '\n' rule, no trimming, bytes);
//   * a training line's ids start with the prompt's ids under models/m2-tiny's tokenizer, and end
//     on a stop id;
//   * the Python checker (checker_argv, run by plain fork/exec — not the sandbox) agrees with
//     score_completion on hand and hostile completions (quotes, code, NUL, invalid UTF-8, 2 MB),
//     and recomputes the answer itself instead of trusting item.answer.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include "base/error.h"
#include "rl/task.h"
#include "tokenizer/tokenizer.h"

namespace mmx::rl {
namespace {

TaskSpec rev_spec() { return TaskSpec{}; }
TaskSpec add_spec() {
  TaskSpec s;
  s.kind = "add";
  return s;
}

TEST(Task, ItemsAreDeterministicAndRight) {
  for (const TaskSpec& s : {rev_spec(), add_spec()}) {
    const auto a = make_task_items(s, Split::kTrain, 7, 500), b = make_task_items(s, Split::kTrain, 7, 500);
    const auto c = make_task_items(s, Split::kTrain, 8, 500);
    ASSERT_EQ(a.size(), 500u);
    int same_as_other_seed = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].prompt, b[i].prompt);
      EXPECT_EQ(a[i].answer, b[i].answer);
      EXPECT_EQ(a[i].key, b[i].key);
      same_as_other_seed += a[i].prompt == c[i].prompt;
    }
    EXPECT_LT(same_as_other_seed, 50) << s.kind << ": another seed draws other items";
  }
  // The first items of seed 1, pinned: the RNG is our own, so these hold on every platform.
  const auto r = make_task_items(rev_spec(), Split::kTrain, 1, 2);
  EXPECT_EQ(task_line(r[0]), "l g k h = h k g l\n");
  EXPECT_EQ(task_line(r[1]), "b g z = z g b\n");
  EXPECT_EQ(task_line(make_task_items(add_spec(), Split::kTrain, 1, 1)[0]), "23+34=57\n");

  // The answers, recomputed here from the prompt.
  for (const TaskItem& it : make_task_items(rev_spec(), Split::kEval, 3, 300)) {
    ASSERT_EQ(it.prompt.substr(it.prompt.size() - 2), " =");
    std::string letters;
    for (size_t i = 0; i + 2 < it.prompt.size(); i += 2) letters += it.prompt[i];
    ASSERT_GE(letters.size(), 3u);
    ASSERT_LE(letters.size(), 5u);
    std::string want;
    for (auto ch = letters.rbegin(); ch != letters.rend(); ++ch) want += std::string(" ") + *ch;
    EXPECT_EQ(it.answer, want) << it.prompt;
  }
  for (const TaskItem& it : make_task_items(add_spec(), Split::kEval, 3, 300)) {
    const size_t plus = it.prompt.find('+');
    const long a = std::stol(it.prompt.substr(0, plus)), b = std::stol(it.prompt.substr(plus + 1));
    EXPECT_EQ(it.prompt, std::to_string(a) + "+" + std::to_string(b) + "=");
    EXPECT_LT(std::max(a, b), 100);
    EXPECT_EQ(it.answer, std::to_string(a + b));
  }
}

TEST(Task, HeldOutSplitIsDisjointFromTraining) {
  for (const TaskSpec& s : {rev_spec(), add_spec()}) {
    std::set<std::string> train;
    std::set<std::pair<std::string, std::string>> train_pairs;  // add: unordered operands
    const auto pair_of = [](const std::string& p) {
      const size_t plus = p.find('+');
      std::string a = p.substr(0, plus), b = p.substr(plus + 1, p.size() - plus - 2);
      return a < b ? std::pair{a, b} : std::pair{b, a};
    };
    for (uint64_t seed : {1, 2, 3})
      for (const TaskItem& it : make_task_items(s, Split::kTrain, seed, 20000)) {
        EXPECT_EQ(task_split(s, it.key), Split::kTrain);
        train.insert(it.prompt);
        if (s.kind == "add") train_pairs.insert(pair_of(it.prompt));
      }
    int64_t n_eval = 0;
    for (uint64_t seed : {1, 2, 3})
      for (const TaskItem& it : make_task_items(s, Split::kEval, seed, 2000)) {
        EXPECT_EQ(task_split(s, it.key), Split::kEval);
        EXPECT_EQ(train.count(it.prompt), 0u) << s.kind << ": held-out " << it.prompt << " is in the training draw";
        if (s.kind == "add") {
          EXPECT_EQ(train_pairs.count(pair_of(it.prompt)), 0u) << "the commuted " << it.prompt << " was trained on";
        }
        ++n_eval;
      }
    EXPECT_EQ(n_eval, 6000);
  }
  // eval_fraction of the item space: every 2-digit pair, counted.
  const TaskSpec s = add_spec();
  int64_t eval = 0;
  for (uint64_t a = 0; a < 100; ++a)
    for (uint64_t b = 0; b < 100; ++b) eval += task_split(s, std::min(a, b) * 1000000000ull + std::max(a, b)) == Split::kEval;
  EXPECT_NEAR(double(eval) / 10000, s.eval_fraction, 0.02);
  // Distinct draws from a split too small are refused, not looped on.
  TaskSpec tiny = add_spec();
  tiny.digits = 1;
  EXPECT_THROW(make_task_items(tiny, Split::kEval, 1, 100, /*distinct=*/true), Error);
  EXPECT_EQ(make_task_items(tiny, Split::kEval, 1, 100, /*distinct=*/false).size(), 100u);
}

TEST(Task, BadSpecsAreRefused) {
  TaskSpec s;
  s.kind = "mul";
  EXPECT_THROW(check_task_spec(s), Error);
  s = TaskSpec{};
  s.min_len = 6;  // > max_len
  EXPECT_THROW(check_task_spec(s), Error);
  s = TaskSpec{};
  s.eval_fraction = 1;
  EXPECT_THROW(make_task_items(s, Split::kEval, 1, 1), Error);
}

TaskItem cat() {
  TaskItem it;
  it.kind = "rev", it.prompt = "c a t =", it.answer = " t a c";
  return it;
}

// {completion, score} for "c a t =" (answer " t a c").
const std::vector<std::pair<std::string, double>>& rev_cases() {
  static const std::vector<std::pair<std::string, double>> v = {
      {" t a c", 1},
      {" t a c\n", 1},
      {" t a c\nanything after the line is ignored", 1},
      {" t a c\n\n\n", 1},
      {" t a c ", 0},
      {"t a c", 0},
      {"  t a c", 0},
      {" t a c\r\n", 0},
      {" t a", 0},
      {" t a c a", 0},
      {"", 0},
      {"\n", 0},
      {"\n t a c", 0},
      {" T A C", 0},
      {std::string(" t a c\0", 7), 0},
      {std::string(" t a c\0\n", 8), 0},
  };
  return v;
}

TEST(Task, ScoreCompletionHandCases) {
  for (const auto& [c, want] : rev_cases()) EXPECT_EQ(score_completion(cat(), c), want) << "'" << c << "'";
  TaskItem add;
  add.kind = "add", add.prompt = "37+48=", add.answer = "85";
  EXPECT_EQ(score_completion(add, "85"), 1);
  EXPECT_EQ(score_completion(add, "85\n37+"), 1);
  EXPECT_EQ(score_completion(add, "085"), 0);
  EXPECT_EQ(score_completion(add, "85.0"), 0);
  EXPECT_EQ(score_completion(add, " 85"), 0);
  EXPECT_EQ(score_completion(add, "8"), 0);
  EXPECT_EQ(score_completion(add, "851"), 0);
  EXPECT_EQ(checker_verdict(0, "1\n"), 1.0);
  EXPECT_EQ(checker_verdict(0, "0\n"), 0.0);
  EXPECT_EQ(checker_verdict(1, "1\n"), std::nullopt);
  EXPECT_EQ(checker_verdict(0, "1"), std::nullopt);
  EXPECT_EQ(checker_verdict(0, ""), std::nullopt);
}

// The format a warm-started model learns is the rollout's: the line's ids are the prompt's ids,
// then the completion's, ending on a stop id.
TEST(Task, LinesTokenizeAsPromptThenCompletion) {
  const tok::Tokenizer tk = tok::Tokenizer::from_path(std::string(MMX_SOURCE_DIR) + "/models/m2-tiny");
  const std::vector<int32_t> stops = task_stop_ids(tk);
  ASSERT_FALSE(stops.empty());
  const std::vector<int32_t> nl = tk.encode("\n");
  ASSERT_EQ(nl.size(), 1u);
  EXPECT_TRUE(std::count(stops.begin(), stops.end(), nl[0]));
  for (const TaskSpec& s : {rev_spec(), add_spec()})
    for (const TaskItem& it : make_task_items(s, Split::kTrain, 5, 300)) {
      const std::vector<int32_t> p = tk.encode(it.prompt), line = tk.encode(task_line(it));
      ASSERT_LT(p.size(), line.size());
      EXPECT_TRUE(std::equal(p.begin(), p.end(), line.begin())) << "'" << it.prompt << "' is not a prefix in ids";
      EXPECT_TRUE(std::count(stops.begin(), stops.end(), line.back())) << task_line(it);
      EXPECT_EQ(std::count_if(line.begin() + int64_t(p.size()), line.end() - 1,
                              [&](int32_t id) { return std::count(stops.begin(), stops.end(), id) > 0; }),
                0);
    }
}

bool have_python() { return access("/usr/bin/python3", X_OK) == 0; }

// Runs each argv with plain fork/exec (PATH search), 16 at a time (each checker is a Python start,
// ~50 ms here); returns {exit status or -1, stdout} per argv. The outputs are a few bytes, below
// a pipe's buffer, so a child never blocks before it is waited for.
std::vector<std::pair<int, std::string>> run_all(const std::vector<std::vector<std::string>>& argvs) {
  std::vector<std::pair<int, std::string>> res(argvs.size(), {-1, ""});
  for (size_t b0 = 0; b0 < argvs.size(); b0 += 16) {
    std::vector<std::pair<pid_t, int>> kids;  // pid, read end
    for (size_t i = b0; i < std::min(argvs.size(), b0 + 16); ++i) {
      int fd[2];
      if (pipe(fd) != 0) return res;
      const pid_t pid = fork();
      if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        std::vector<char*> a;
        for (const std::string& s : argvs[i]) a.push_back(const_cast<char*>(s.c_str()));
        a.push_back(nullptr);
        execvp(a[0], a.data());
        _exit(127);
      }
      close(fd[1]);
      kids.push_back({pid, fd[0]});
    }
    for (size_t k = 0; k < kids.size(); ++k) {
      int st = 0;
      waitpid(kids[k].first, &st, 0);
      std::string out;
      char buf[4096];
      for (ssize_t n; (n = read(kids[k].second, buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
      close(kids[k].second);
      res[b0 + k] = {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
    }
  }
  return res;
}

// Each (item, completion, expected score): the checker's verdict must be that score.
void expect_checker(const std::vector<std::tuple<TaskItem, std::string, double>>& cases) {
  std::vector<std::vector<std::string>> argvs;
  for (const auto& [it, c, want] : cases) argvs.push_back(checker_argv(it, c));
  const auto res = run_all(argvs);
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& [it, c, want] = cases[i];
    const std::optional<double> v = checker_verdict(res[i].first, res[i].second);
    EXPECT_EQ(v, std::optional<double>(want))
        << "'" << it.prompt << "' completion of " << c.size() << " bytes '" << c.substr(0, 60) << "': exit "
        << res[i].first << ", stdout '" << res[i].second << "'";
  }
}

TEST(Task, PythonCheckerAgreesOnHandAndHostileCompletions) {
  if (!have_python()) GTEST_SKIP() << "no /usr/bin/python3";
  std::vector<std::pair<std::string, double>> cases = rev_cases();
  const std::string big(2 << 20, 'a');
  for (const std::string& c : {
           std::string("'"), std::string("\""), std::string("\\"), std::string(" t a c\\n"),
           std::string("' + ' t a c"), std::string("\"); print(1); exit(0) #"),
           std::string("__import__('sys').stdout.write('1\\n') or exit(0)"), std::string("$(echo 1)"),
           std::string("`echo 1`; echo 1"), std::string("%s%n{}{0}"), std::string("\xff\xfe t a c"),
           std::string(" t a c\xff\n"), std::string("\xc3\x28"), std::string(1, '\0'),
           std::string(" t a c\n\0\xff", 9), big, " t a c" + big, big + "\n t a c", " t a c\n" + big,
           std::string(kCheckerMaxBytes - 1, 'x') + "\n", std::string(kCheckerMaxBytes + 5, 'x') + "\n"})
    cases.push_back({c, score_completion(cat(), c)});
  std::vector<std::tuple<TaskItem, std::string, double>> all;
  int ones = 0;
  for (const auto& [c, want] : cases) {
    all.push_back({cat(), c, want});
    ones += want == 1;
  }
  EXPECT_GE(ones, 5);  // both verdicts are exercised
  // Real items of both kinds, right and wrong completions.
  for (const TaskSpec& s : {rev_spec(), add_spec()})
    for (const TaskItem& it : make_task_items(s, Split::kEval, 9, 2)) {
      all.push_back({it, it.answer + "\n", 1});
      all.push_back({it, it.answer + "0\n", 0});
      all.push_back({it, it.answer.substr(1), 0});
    }
  // The checker recomputes the answer from the prompt: a wrong stored answer does not fool it.
  TaskItem lie = cat();
  lie.answer = " c a t";
  all.push_back({lie, " t a c", 1});
  all.push_back({lie, " c a t", 0});
  expect_checker(all);
}

// The batched checker (one run for many samples, the RL loop's path) gives each pair the verdict
// of score_completion, in order; malformed output or a failed run gives no verdict at all.
TEST(Task, BatchedCheckerAgreesWithScoreInOrder) {
  if (!have_python()) GTEST_SKIP() << "no /usr/bin/python3";
  std::vector<TaskItem> items;
  std::vector<std::string> comps;
  std::vector<double> want;
  for (const TaskSpec& s : {rev_spec(), add_spec()})
    for (const TaskItem& it : make_task_items(s, Split::kTrain, 4, 6)) {
      for (const std::string& c : {it.answer + "\n", it.answer + "0", std::string("'\"$(x)\0", 7), it.answer}) {
        items.push_back(it);
        comps.push_back(c);
        want.push_back(score_completion(it, c));
      }
    }
  const auto res = run_all({checker_argv_batch(items, comps)});
  const std::vector<std::optional<double>> got = checker_verdicts(res[0].first, res[0].second, items.size());
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], std::optional<double>(want[i])) << i;
  for (const auto& [status, out] : std::vector<std::pair<int, std::string>>{
           {1, res[0].second}, {0, res[0].second.substr(2)}, {0, res[0].second + "1\n"}, {0, "2\n"}, {0, ""}}) {
    for (const std::optional<double>& v : checker_verdicts(status, out, items.size())) EXPECT_FALSE(v.has_value());
  }
}

}  // namespace
}  // namespace mmx::rl
