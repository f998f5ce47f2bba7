// A training run's checkpoints, crash-safe: what `mmx train` writes every --save-every steps and
// what --resume reads back. A kill -9 at any instant (inside a write included) leaves the run
// directory resumable from its last complete checkpoint, with nothing mixed and nothing lost.
//
// One checkpoint of step N, written in this order (each file to FILE.tmp, fsync, rename, fsync the
// directory: base/file_io.h):
//   train_state-0000000N.safetensors   f32 master weights, AdamW m and v (the exact resume state)
//   model.safetensors                  the HF weights (bf16/f32 export of the master weights)
//   train_log.csv                      appended one row per step as the run goes; fsync'ed here
//   train_state.json                   THE COMMIT: written last, it names step N, adam_t, tokens,
//                                      the run's options, and each file above with its size and hash
// After the commit the older train_state-*.safetensors are removed. Until it, the previous
// train_state.json still names the previous state file, which is still there.
//
// open_checkpoint (on --resume) reads train_state.json (an empty or cut file is an error naming it),
// checks the state file against its size and hash (a mismatch: an error naming the file), rewrites
// model.safetensors from the master weights when it does not match (it is derived; said in the log),
// removes stale temporaries and state files no commit names (said), and cuts train_log.csv back to
// the checkpoint's step (rows of steps that ran after it are redone; said).
//
// A run written before this protocol (train_state.safetensors, no "files" in train_state.json)
// still resumes, unchecked.
//
// Fault points (for the kill -9 drill, tests/train/kill_drill_test.py): with the environment
// variable MMX_TRAIN_KILL_AT="STEP:POINT", the process SIGKILLs itself when the checkpoint of STEP
// reaches POINT: state-written, model-written, log-synced, manifest-tmp-written, committed, cleaned.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "train/adamw.h"
#include "train/params.h"

namespace mmx::train {

namespace fs = std::filesystem;

// The append-only train_log.csv: one row per step, header first.
class TrainLog {
 public:
  static constexpr const char* kHeader = "step,lr,loss,grad_norm,val_loss,tokens,index_kl,step_s,tokens_per_s";
  // A new run: the log starts over with its header.
  static TrainLog start(const fs::path& path);
  // A resumed run at `step`: keeps rows 1..step, drops a cut last line and the rows past `step`
  // (their steps run again), warns when rows 1..step are not all there. Prints what it did.
  static TrainLog resume(const fs::path& path, int64_t step, bool quiet);
  // Appends one row (flushed; made durable by sync()).
  void append(const std::string& row);
  void sync() const;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// What a committed checkpoint says (train_state.json).
struct CheckpointInfo {
  int64_t step = 0, adam_t = 0, tokens = 0;
  nlohmann::json run;        // the options that fix the run (trainer.cpp's run_json)
  fs::path state_file;       // the master weights and moments of `step`
  nlohmann::json files;      // {"NAME": {"bytes", "hash"}} of the committed files (null: an old run)
};

// Writes the checkpoint of `step` into `dir` (the order above). `run`: the run's options.
void commit_checkpoint(const fs::path& dir, const ParamSet<float>& P, const AdamW& opt, int64_t step,
                       int64_t tokens, const nlohmann::json& run, DType model_dtype, const TrainLog& log);

// Reads and checks the committed checkpoint of `dir`; cleans what a killed write left. Throws
// mmx::Error naming the file for a missing, empty, cut or mismatched train_state.json / state file.
CheckpointInfo open_checkpoint(const fs::path& dir, bool quiet);

// The master weights and AdamW moments of a checkpoint into P and opt (shapes checked).
void load_checkpoint_state(const CheckpointInfo& c, ParamSet<float>& P, AdamW& opt);

// After load_checkpoint_state: when dir's model.safetensors is not the one the commit names (cut,
// corrupt, or from a later step's killed write), writes it again from P. Prints when it does.
// (Its dtype must be the run's --save-dtype: then the bytes are those the commit hashed.)
void repair_model_export(const CheckpointInfo& c, const fs::path& dir, const ParamSet<float>& P, DType model_dtype);

}  // namespace mmx::train
