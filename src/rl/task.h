// Verifiable toy tasks for agent RL (docs/rl.md "Toy task"): prompts with exactly one right
// answer, a fixed train / held-out split, an in-process checker, and the same check as a command
// line for the sandbox (an independent Python implementation of the task).
//
//   rev   reverse k space-separated letters      "c a t =" -> " t a c"
//   add   the sum of two non-negative integers   "37+48="  -> "85"
//
// A training line is prompt + answer + "\n" (task_line); the M2 tokenizer encodes the prompt as
// a prefix of the line's ids (tested on models/m2-tiny), so what `mmx train` learns on the lines
// is the rollout's prompt → completion.
//
// The answer ends at the first '\n' of the completion (kTaskStop; the rollout should stop on its
// id, task_stop_ids). Everything after that '\n' is ignored. A completion without '\n' (it ended
// on EOS or ran out of tokens) is judged as a whole. No trimming: " t a c " or "85 " is wrong.
// Comparison is byte for byte (invalid UTF-8 and NUL bytes are ordinary bytes).
//
// Not here: generation, reward shaping, the sandbox (rl/sandbox.h), the RL loop.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mmx::tok { class Tokenizer; }

namespace mmx::rl {

inline constexpr char kTaskStop = '\n';

// Every id whose text contains '\n' (special tokens excluded): the stop ids of a task rollout, so
// a sample ends with the token that ends its answer.
std::vector<int32_t> task_stop_ids(const tok::Tokenizer& tk);

struct TaskSpec {
  std::string kind = "rev";     // "rev" or "add"
  int min_len = 3, max_len = 5; // rev: letters per prompt (1..16)
  int letters = 26;             // rev: the alphabet is the first `letters` of a..z (2..26)
  int digits = 2;               // add: operands in [0, 10^digits) (1..9)
  double eval_fraction = 0.1;   // share of the item space held out for evaluation (0, 1)
};

enum class Split { kTrain, kEval };

struct TaskItem {
  std::string kind;    // TaskSpec::kind
  std::string prompt;  // what the model is given, e.g. "c a t ="
  std::string answer;  // the exact text before the '\n', e.g. " t a c"
  uint64_t key = 0;    // the item's identity; its split is a hash of it (add: of the unordered pair)
};

// Throws mmx::Error naming the field of a spec out of range or an unknown kind.
void check_task_spec(const TaskSpec& spec);

// The split of an item key: a hash of (kind, key), independent of any seed, so the held-out items
// are the same for every seed and never appear in a training corpus.
Split task_split(const TaskSpec& spec, uint64_t key);

// n items of `split`, a pure function of (spec, split, seed, n) on every platform (own RNG, no
// std distributions). distinct: no item twice (throws mmx::Error when the split has fewer than n
// items, e.g. add with 1 digit).
std::vector<TaskItem> make_task_items(const TaskSpec& spec, Split split, uint64_t seed, int64_t n,
                                      bool distinct = false);

// prompt + answer + "\n": one line of the warm-start corpus.
std::string task_line(const TaskItem& item);

// 1 when the completion's text up to its first '\n' (all of it when it has none) equals
// item.answer byte for byte, else 0.
double score_completion(const TaskItem& item, std::string_view completion);

// The sandbox's check of the same thing:
//   python3 -I -S -c <script> <kind> <hex(prompt)> <hex(completion[:kCheckerMaxBytes])>
// The script recomputes the answer from the prompt (its own implementation of the task), applies
// score_completion's rule and prints "1" or "0" on a line, exit 0. Nothing of the completion is
// ever code or a shell word: it travels hex-encoded in one argv entry and is compared as bytes.
// Only the first kCheckerMaxBytes bytes are passed (argv entries are limited to 128 KiB); the
// verdict is unchanged, since every answer is shorter: a cut line is longer than any answer.
inline constexpr size_t kCheckerMaxBytes = 16384;
std::vector<std::string> checker_argv(const TaskItem& item, std::string_view completion);

// The same check for many (item, completion) pairs in ONE run (the RL loop's per-step batch: one
// sandbox start instead of one per sample): the script takes the (kind, hex prompt, hex
// completion) triples in order and prints one verdict line each. Keep the batch's total argv
// under ~1 MiB (chunk it): the kernel caps the whole argv.
std::vector<std::string> checker_argv_batch(const std::vector<TaskItem>& items,
                                            const std::vector<std::string>& completions);
// n verdicts from a batch run: all nullopt unless it exited 0 with exactly n lines of "0"/"1".
std::vector<std::optional<double>> checker_verdicts(int exit_status, std::string_view out, size_t n);

// The checker's verdict from its exit status and stdout: 1 or 0, or nullopt when it did not
// reach one (a Python error, a kill, other output) — a failure of the check, not of the answer.
std::optional<double> checker_verdict(int exit_status, std::string_view out);

}  // namespace mmx::rl
