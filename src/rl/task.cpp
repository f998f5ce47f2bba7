// The toy RL tasks (rl/task.h): item generation, the split, the in-process check and the Python
// checker's command line.
#include "rl/task.h"

#include <unordered_set>

#include "base/error.h"
#include "tokenizer/tokenizer.h"

namespace mmx::rl {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A seeded stream of 64-bit words and uniform integers in [0, n) (multiply-high: the same
// numbers on every platform, unlike std::uniform_int_distribution).
struct Rng {
  uint64_t state;
  uint64_t next() { return splitmix64(state++); }
  uint64_t below(uint64_t n) { return uint64_t((unsigned __int128)next() * n >> 64); }
};

uint64_t kind_salt(const std::string& kind) { return kind == "rev" ? 0x5245560000000001ull : 0x4144440000000002ull; }

uint64_t pow10(int d) {
  uint64_t p = 1;
  for (int i = 0; i < d; ++i) p *= 10;
  return p;
}

// rev: letters c_0..c_{k-1} (0-based in the alphabet) as 5 bits each, the length above them.
uint64_t rev_key(const std::vector<int>& c) {
  uint64_t key = uint64_t(c.size()) << 60;
  for (size_t i = 0; i < c.size(); ++i) key |= uint64_t(c[i]) << (5 * i);
  return key;
}

TaskItem draw_item(const TaskSpec& s, Rng& rng) {
  TaskItem it;
  it.kind = s.kind;
  if (s.kind == "rev") {
    const int k = s.min_len + int(rng.below(uint64_t(s.max_len - s.min_len + 1)));
    std::vector<int> c(static_cast<size_t>(k));
    for (int& x : c) x = int(rng.below(uint64_t(s.letters)));
    for (int i = 0; i < k; ++i) {
      it.prompt += char('a' + c[size_t(i)]);
      it.prompt += ' ';
      it.answer += ' ';
      it.answer += char('a' + c[size_t(k - 1 - i)]);
    }
    it.prompt += '=';
    it.key = rev_key(c);
  } else {
    const uint64_t n = pow10(s.digits), a = rng.below(n), b = rng.below(n);
    it.prompt = std::to_string(a) + "+" + std::to_string(b) + "=";
    it.answer = std::to_string(a + b);
    it.key = std::min(a, b) * 1000000000ull + std::max(a, b);  // a+b and b+a: one split
  }
  return it;
}

std::string hex(std::string_view s) {
  static const char* d = "0123456789abcdef";
  std::string h;
  h.reserve(2 * s.size());
  for (unsigned char c : s) {
    h += d[c >> 4];
    h += d[c & 15];
  }
  return h;
}

// The sandbox's checker: its own implementation of both tasks (it never sees item.answer), then
// score_completion's rule on bytes.
constexpr const char* kCheckerScript = R"PY(import sys
def verdict(kind, p, c):
    if kind == 'rev':
        assert p.endswith(' =')
        want = ''.join(' ' + x for x in reversed(p[:-2].split(' ')))
    elif kind == 'add':
        assert p.endswith('=')
        a, b = p[:-1].split('+')
        want = str(int(a) + int(b))
    else:
        sys.exit(2)
    nl = c.find(b'\n')
    line = c if nl < 0 else c[:nl]
    return 1 if line == want.encode('ascii') else 0
a = sys.argv[1:]
if len(a) == 0 or len(a) % 3:
    sys.exit(2)
for i in range(0, len(a), 3):
    print(verdict(a[i], bytes.fromhex(a[i + 1]).decode('ascii'), bytes.fromhex(a[i + 2])))
)PY";

}  // namespace

void check_task_spec(const TaskSpec& s) {
  if (s.kind != "rev" && s.kind != "add") fail("task kind '{}': use rev or add", s.kind);
  if (s.min_len < 1 || s.max_len > 12 || s.min_len > s.max_len)
    fail("task rev: need 1 <= --min-len <= --max-len <= 12 (got {}..{})", s.min_len, s.max_len);
  if (s.letters < 2 || s.letters > 26) fail("task rev: --letters must be in 2..26 (got {})", s.letters);
  if (s.digits < 1 || s.digits > 9) fail("task add: --digits must be in 1..9 (got {})", s.digits);
  if (!(s.eval_fraction > 0 && s.eval_fraction < 1))
    fail("task: --eval-fraction must be strictly between 0 and 1 (got {})", s.eval_fraction);
}

Split task_split(const TaskSpec& spec, uint64_t key) {
  const uint64_t h = splitmix64(key ^ kind_salt(spec.kind));
  return double(h >> 11) * 0x1.0p-53 < spec.eval_fraction ? Split::kEval : Split::kTrain;
}

std::vector<TaskItem> make_task_items(const TaskSpec& spec, Split split, uint64_t seed, int64_t n, bool distinct) {
  check_task_spec(spec);
  if (n < 0) fail("make_task_items: n must be >= 0 (got {})", n);
  Rng rng{splitmix64(seed ^ kind_salt(spec.kind)) ^ (split == Split::kEval ? 0x4556414cull : 0)};
  std::vector<TaskItem> items;
  items.reserve(size_t(n));
  std::unordered_set<std::string> seen;
  const int64_t max_draws = 1000 * n + 1000000;
  for (int64_t draws = 0; int64_t(items.size()) < n; ++draws) {
    if (draws == max_draws)
      fail("task {}: the {} split has fewer than {} distinct items (found {}); ask for fewer or a larger task",
           spec.kind, split == Split::kEval ? "eval" : "train", n, items.size());
    TaskItem it = draw_item(spec, rng);
    if (task_split(spec, it.key) != split) continue;
    if (distinct && !seen.insert(it.prompt).second) continue;
    items.push_back(std::move(it));
  }
  return items;
}

std::vector<int32_t> task_stop_ids(const tok::Tokenizer& tk) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < int32_t(tk.vocab_size()); ++id) {
    const int32_t one[1] = {id};
    if (tk.decode(one, /*skip_special_tokens=*/true).find(kTaskStop) != std::string::npos) ids.push_back(id);
  }
  return ids;
}

std::string task_line(const TaskItem& item) { return item.prompt + item.answer + kTaskStop; }

double score_completion(const TaskItem& item, std::string_view completion) {
  const size_t nl = completion.find(kTaskStop);
  const std::string_view line = nl == std::string_view::npos ? completion : completion.substr(0, nl);
  return line == item.answer ? 1.0 : 0.0;
}

std::vector<std::string> checker_argv(const TaskItem& item, std::string_view completion) {
  MMX_CHECK(item.answer.size() < kCheckerMaxBytes, "answer of {} bytes", item.answer.size());
  return {"python3", "-I", "-S", "-c", kCheckerScript, item.kind, hex(item.prompt),
          hex(completion.substr(0, std::min(completion.size(), kCheckerMaxBytes)))};
}

std::vector<std::string> checker_argv_batch(const std::vector<TaskItem>& items,
                                            const std::vector<std::string>& completions) {
  MMX_CHECK(items.size() == completions.size() && !items.empty(), "{} items, {} completions", items.size(),
            completions.size());
  std::vector<std::string> argv = {"python3", "-I", "-S", "-c", kCheckerScript};
  for (size_t i = 0; i < items.size(); ++i) {
    const std::vector<std::string> one = checker_argv(items[i], completions[i]);
    argv.insert(argv.end(), one.end() - 3, one.end());
  }
  return argv;
}

std::vector<std::optional<double>> checker_verdicts(int exit_status, std::string_view out, size_t n) {
  std::vector<std::optional<double>> v(n);
  if (exit_status != 0) return v;
  size_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    if (at + 2 > out.size() || out[at + 1] != '\n' || (out[at] != '0' && out[at] != '1'))
      return std::vector<std::optional<double>>(n);
    v[i] = out[at] == '1' ? 1.0 : 0.0;
    at += 2;
  }
  if (at != out.size()) return std::vector<std::optional<double>>(n);
  return v;
}

std::optional<double> checker_verdict(int exit_status, std::string_view out) {
  if (exit_status != 0) return std::nullopt;
  if (out == "1\n") return 1.0;
  if (out == "0\n") return 0.0;
  return std::nullopt;
}

}  // namespace mmx::rl
