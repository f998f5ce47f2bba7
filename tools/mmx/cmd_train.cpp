// mmx train: train a MiniMax model on a text file, from scratch or from --init weights (src/train/trainer.h).
#include <cmath>
#include <cstdio>

#include "common.h"
#include "train/trainer.h"

namespace mmx::cli {

void add_train(CLI::App& app, Action& action) {
  auto o = std::make_shared<train::TrainOptions>();
  CLI::App* c = app.add_subcommand(
      "train",
      "Train a model from scratch on a text file; writes an HF checkpoint (+ train_log.csv, loss.png, "
      "train_state.* for --resume) to -o DIR");
  c->add_option("--arch", o->shape.arch, "Model family (minimax_m2, minimax_text01, minimax_m3)")
      ->check(CLI::IsMember({"minimax_m2", "minimax_text01", "minimax_m3"}));
  c->add_option("--data", o->data, "Training text (UTF-8)");
  c->add_option("--task", o->task,
                "Train on a synthetic task instead of --data: retrieval (key-value pairs planted far back, "
                "queried at the end; docs/training.md)")
      ->check(CLI::IsMember({"retrieval"}));
  c->add_option("--task-pairs", o->task_pairs, "--task retrieval: key-value pairs per sequence")
      ->check(CLI::Range(1, 256));
  c->add_option("--val", o->val, "Held-out text: loss every --eval-every steps");
  add_shape_options(c, &o->shape, /*with_vocab=*/false);
  c->add_option("--tokenizer", o->tokenizer, "tokenizer.json (or a directory with one); default: train one on --data");
  c->add_option("--vocab", o->vocab, "Size of the tokenizer trained on --data when --tokenizer is not given")
      ->check(CLI::Range(300, 1 << 20));
  c->add_option("--steps", o->steps, "Optimizer steps in total")->check(CLI::PositiveNumber);
  c->add_option("--seq-len", o->seq_len, "Tokens per training sequence")->check(CLI::Range(2, 1 << 16));
  c->add_option("--batch", o->batch, "Sequences per optimizer step")->check(CLI::PositiveNumber);
  c->add_option("--micro-batch", o->micro_batch,
                "Sequences per forward/backward (gradient accumulation; must divide --batch; 0 = --batch)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--lr", o->lr, "Peak learning rate (AdamW)")->check(CLI::PositiveNumber);
  c->add_option("--min-lr-ratio", o->min_lr_ratio, "Cosine floor as a fraction of --lr")->check(CLI::Range(0.0, 1.0));
  c->add_option("--warmup", o->warmup, "Linear warm-up steps")->check(CLI::NonNegativeNumber);
  c->add_option("--weight-decay", o->weight_decay, "AdamW decoupled weight decay (matrices only)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--clip", o->clip, "Global gradient-norm clip (0 = off)")->check(CLI::NonNegativeNumber);
  c->add_option("--bias-rate", o->bias_rate,
                "Aux-loss-free routing-bias update per step (sign of the load imbalance times this)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--index-loss-weight", o->index_loss_weight,
                "minimax_m3: loss = CE + W · KL(main attention ‖ indexer), teacher detached (spec §5.6)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--seed", o->seed, "Seed of the initialisation and the data order");
  c->add_option("--eval-every", o->eval_every, "Held-out loss every N steps (0 = at the end only)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--eval-windows", o->eval_windows, "Held-out windows of --seq-len tokens per evaluation")
      ->check(CLI::PositiveNumber);
  c->add_option("--save-every", o->save_every, "Checkpoint every N steps (0 = at the end only)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--save-dtype", o->save_dtype, "model.safetensors dtype (master weights stay f32)")
      ->check(CLI::IsMember({"bf16", "f32"}));
  c->add_option("-o,--out", o->out, "Run directory (default with --resume: the resumed one)");
  c->add_option("--init", o->init,
                "Start from this checkpoint's weights instead of a random initialisation (fine-tuning; give "
                "its shape flags; its tokenizer unless --tokenizer)");
  c->add_option("--resume", o->resume, "Continue the run saved in this directory up to --steps");
  c->add_option("-t,--threads", o->threads, "CPU threads (0 = all cores)");
  c->add_option("--recompute", o->recompute,
                "Activation recomputation of the softmax attention probabilities: auto (when saving them "
                "would take over 1 GiB), always, never. Memory only: the run is bitwise the same")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  c->callback([o, c, &action] {
    if (o->resume.empty() && o->data.empty() && o->task.empty())
      throw CLI::ValidationError("--data", "required (unless --resume or --task)");
    if (o->resume.empty() && o->out.empty()) throw CLI::ValidationError("-o", "required (unless --resume)");
    apply_family_defaults(c, &o->shape);  // the family's tiny shape for flags not given
    action = [o] {
      const train::TrainResult r = train::train_run(*o);
      std::printf("steps=%lld tokens=%lld loss=%.4f val_loss=%.4f wall_s=%.1f\n", (long long)r.steps,
                  (long long)r.tokens, r.last_loss, r.val_loss, r.wall_s);
    };
  });
}

}  // namespace mmx::cli
