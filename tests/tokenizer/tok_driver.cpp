// tok_driver — batch front end of mmx::tok::Tokenizer for the HF parity test and the encode
// benchmark (one process per tokenizer instead of one per string).
//
//   tok_driver encode TOKENIZER.json RECORDS.bin IDS.txt DECODED.bin [N_EXTRA]
//       RECORDS.bin: records of (uint32 little-endian byte length, bytes). Writes one line of
//       space-separated ids per record to IDS.txt and each record's decode(ids) (skip_special
//       false) as a record to DECODED.bin. Also checks, per record, that streaming the ids
//       through the Detokenizer gives exactly decode(ids); prints a summary on stderr and exits 1
//       on any such mismatch. With N_EXTRA, the first N_EXTRA records are also encoded with
//       add_special_tokens=true (lines in IDS.txt.special) and decoded with skip_special_tokens
//       (records in DECODED.bin.skip).
//   tok_driver bench TOKENIZER.json RECORDS.bin REPS
//       encodes every record REPS times (single thread); prints JSON with the first-pass and
//       median MB/s.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace {

std::vector<std::string> read_records(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) mmx::fail("cannot open records file '{}'", path);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string all = ss.str();
  std::vector<std::string> out;
  size_t i = 0;
  while (i + 4 <= all.size()) {
    const uint32_t n = uint32_t(uint8_t(all[i])) | uint32_t(uint8_t(all[i + 1])) << 8 |
                       uint32_t(uint8_t(all[i + 2])) << 16 | uint32_t(uint8_t(all[i + 3])) << 24;
    i += 4;
    if (i + n > all.size()) mmx::fail("records file '{}' is truncated", path);
    out.emplace_back(all.substr(i, n));
    i += n;
  }
  return out;
}

void put_record(std::string& out, const std::string& s) {
  const uint32_t n = uint32_t(s.size());
  for (int k = 0; k < 4; ++k) out.push_back(char((n >> (8 * k)) & 0xFF));
  out += s;
}

int run_encode(const std::string& tok_path, const std::string& rec_path, const std::string& ids_path,
               const std::string& dec_path, size_t n_extra) {
  const mmx::tok::Tokenizer tok = mmx::tok::Tokenizer::from_file(tok_path);
  const std::vector<std::string> recs = read_records(rec_path);
  std::string ids_txt, dec_bin, special_txt, skip_bin;
  auto put_ids = [](std::string& out, const std::vector<int32_t>& ids) {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) out.push_back(' ');
      out += std::to_string(ids[i]);
    }
    out.push_back('\n');
  };
  size_t stream_mismatch = 0;
  for (size_t r = 0; r < recs.size(); ++r) {
    const std::vector<int32_t> ids = tok.encode(recs[r]);
    put_ids(ids_txt, ids);
    if (r < n_extra) {
      put_ids(special_txt, tok.encode(recs[r], true));
      put_record(skip_bin, tok.decode(ids, true));
    }
    const std::string dec = tok.decode(ids, false);
    put_record(dec_bin, dec);
    for (bool skip : {false, true}) {
      mmx::tok::Detokenizer dt(tok, skip);
      std::string streamed;
      for (int32_t id : ids) streamed += dt.push(id);
      streamed += dt.flush();
      if (streamed != tok.decode(ids, skip)) {
        if (stream_mismatch++ < 5) std::fprintf(stderr, "detokenizer mismatch on record %zu (skip_special=%d)\n", r, int(skip));
      }
    }
  }
  std::ofstream(ids_path, std::ios::binary) << ids_txt;
  std::ofstream(dec_path, std::ios::binary) << dec_bin;
  if (n_extra) {
    std::ofstream(ids_path + ".special", std::ios::binary) << special_txt;
    std::ofstream(dec_path + ".skip", std::ios::binary) << skip_bin;
  }
  std::fprintf(stderr, "tok_driver: %zu records, %zu detokenizer mismatches\n", recs.size(), stream_mismatch);
  return stream_mismatch ? 1 : 0;
}

int run_bench(const std::string& tok_path, const std::string& rec_path, int reps) {
  using clock = std::chrono::steady_clock;
  const auto t_load = clock::now();
  const mmx::tok::Tokenizer tok = mmx::tok::Tokenizer::from_file(tok_path);
  const double load_s = std::chrono::duration<double>(clock::now() - t_load).count();
  const std::vector<std::string> recs = read_records(rec_path);
  size_t bytes = 0, n_tokens = 0;
  for (const auto& r : recs) bytes += r.size();
  std::vector<double> mbps;
  for (int rep = 0; rep < reps; ++rep) {
    const auto t0 = clock::now();
    size_t n = 0;
    for (const auto& r : recs) n += tok.encode(r).size();
    const double s = std::chrono::duration<double>(clock::now() - t0).count();
    mbps.push_back(double(bytes) / 1e6 / s);
    n_tokens = n;
  }
  const double first = mbps.front();
  std::sort(mbps.begin(), mbps.end());
  std::printf("{\"impl\": \"mmx\", \"bytes\": %zu, \"records\": %zu, \"tokens\": %zu, \"load_s\": %.3f, "
              "\"first_mbps\": %.2f, \"median_mbps\": %.2f}\n",
              bytes, recs.size(), n_tokens, load_s, first, mbps[mbps.size() / 2]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "encode" && (argc == 6 || argc == 7))
      return run_encode(argv[2], argv[3], argv[4], argv[5], argc == 7 ? size_t(std::atoll(argv[6])) : 0);
    if (mode == "bench" && argc == 5) return run_bench(argv[2], argv[3], std::max(1, std::atoi(argv[4])));
    std::fprintf(stderr,
                 "usage: tok_driver encode TOKENIZER.json RECORDS.bin IDS.txt DECODED.bin [N_EXTRA]\n"
                 "       tok_driver bench TOKENIZER.json RECORDS.bin REPS\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tok_driver: error: %s\n", e.what());
    return 1;
  }
}
