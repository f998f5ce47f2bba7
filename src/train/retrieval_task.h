// A synthetic retrieval task (`mmx train --task retrieval`, `mmx probe --synthetic`): associative
// recall with the pairs planted far back and queried at the end, in token ids (no tokenizer).
//
//   [lead filler] [k1 v1 k2 v2 ... kP vP] [F filler ids] [kσ1 vσ1 kσ2 vσ2 ... kσP vσP]
//                 `------ P pairs -----'                 `-- the P keys again, shuffled --'
//
// Keys are P distinct ids of [256, 512), values ids of [512, 768) drawn with replacement, filler ids
// of [0, 256) (noise the state must not let drown the pairs). The scored targets are the values
// after the queried keys (targets[i] = v at a query key's position i, -1 elsewhere): 1 in 4P + F
// ids, each needing a lookup F + 2 .. F + 4P - 2 ids back. Chance is 1/256 (0.39 %), a copy of
// the nearest value seen 1/P. A sequence has exactly `len` ids: lead = len - 4P - F.
#pragma once

#include <cstdint>
#include <vector>

namespace mmx::train {

constexpr int32_t kRetrievalVocab = 1024;  // [0,256) filler, [256,512) keys, [512,768) values, rest unused
constexpr int64_t kRetrievalMaxPairs = 256;

// Sequence `index` of the stream `seed`: len ids with `filler` ids between the pairs and the
// queries, written to tokens[0..len) and targets[0..len). Pure function of its arguments.
// Throws mmx::Error unless 1 <= pairs <= 256 and 4·pairs + filler <= len.
void retrieval_sequence(uint64_t seed, uint64_t index, int64_t len, int64_t pairs, int64_t filler,
                        int32_t* tokens, int32_t* targets);

// Training rows row0 .. row0+n-1 of step `step` (resized to [n, len]): each a sequence whose filler
// is drawn uniformly from [0, len - 4·pairs], so every distance the window allows is trained.
// eval = true draws from a separate stream (the held-out rows; `step` is then the row block).
void retrieval_rows(uint64_t seed, int64_t step, int64_t row0, int64_t n, int64_t len, int64_t pairs, bool eval,
                    std::vector<int32_t>& tokens, std::vector<int32_t>& targets);

}  // namespace mmx::train
