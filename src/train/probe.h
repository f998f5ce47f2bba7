// The long-range retrieval probe behind `mmx probe` (training issue: "a key planted far back,
// queried at the end").
//
// One sample, in token ids (each piece tokenized on its own, so the value's ids are the same at the
// plant and at the answer):
//
//   [lead: 16 held-out ids] [KEY = "VALUE"\n] [filler: `distance` held-out ids] [\nKEY = "] VALUE
//                            `---- plant ----'                                   `- query -' answer
//
// KEY and VALUE are each two random words joined by `_` (words: retrieval_words(), the held-out
// text's own, so every id is in distribution; about 500 of them: ~18 bits per string); lead and
// filler are contiguous spans of held-out text at random offsets. The control sample is the same sequence with a different VALUE in the
// plant: the answer is then nowhere in the context and its NLL is what the model can guess without
// retrieval. A model that retrieves scores the answer far better planted than in the control.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace mmx::train {

struct RetrievalSample {
  std::string key, value;         // the planted strings (value: the answer's text)
  std::vector<int32_t> context;   // everything before the answer (lead, plant, filler, query)
  std::vector<int32_t> answer;    // VALUE's ids, scored with teacher forcing after `context`
  int64_t plant_end = 0;          // index one past the plant's last id in `context`
  int64_t query_begin = 0;        // index of the query's first id: query_begin - plant_end = distance
};

// The words KEY and VALUE are made of: every [a-z]{3,8} word of `text` seen at least 5 times,
// sorted. Throws mmx::Error when there are fewer than 16.
std::vector<std::string> retrieval_words(std::string_view text);

// Sample `index` at `distance` filler ids, a pure function of (seed, distance, index). `held_out`
// are the ids of the held-out text (at least distance + 17 of them). `planted` false = the control.
// Throws mmx::Error when the text is too short for the distance.
RetrievalSample make_retrieval_sample(const tok::Tokenizer& tk, const std::vector<int32_t>& held_out,
                                      const std::vector<std::string>& words, int64_t distance,
                                      uint64_t seed, int64_t index, bool planted);

}  // namespace mmx::train
