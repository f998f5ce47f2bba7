#!/usr/bin/python3
"""The unigram baseline of docs/models.md: held-out NLL per token of a model that ignores context
and predicts each token with its training-set frequency (add-one smoothed over the vocabulary),
under a checkpoint's own tokenizer — the number a trained model has to beat.

  unigram_baseline.py --mmx build/tools/mmx -m DIR --train FILE --val FILE
Prints `tokens=<n> nll=<nats/token> ppl=<exp(nll)>` like `mmx ppl` (every val token after the
first is scored, as there).
"""
import argparse
import json
import math
import os
import subprocess
from collections import Counter


def ids(mmx, model, path):
    out = subprocess.run([mmx, "tokenize", "-m", model, "--file", path], capture_output=True, text=True,
                         check=True).stdout
    return [int(x) for x in out.replace(",", " ").split()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mmx", required=True)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--train", required=True)
    ap.add_argument("--val", required=True)
    a = ap.parse_args()
    vocab = json.load(open(os.path.join(a.model, "config.json")))["vocab_size"]
    tr, va = ids(a.mmx, a.model, a.train), ids(a.mmx, a.model, a.val)
    c = Counter(tr)
    total = len(tr) + vocab
    nll = -sum(math.log((c[t] + 1) / total) for t in va[1:]) / (len(va) - 1)
    print(f"tokens={len(va) - 1} nll={nll:.6f} ppl={math.exp(nll):.4f}")


if __name__ == "__main__":
    main()
