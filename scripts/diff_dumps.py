#!/usr/bin/env python3
"""Layer-by-layer diff of named intermediates: `mmx logits --dump-dir A` vs
`reference/minimax_m2.py --dump-dir B` (same model, same ids).

  /usr/bin/python3 scripts/diff_dumps.py A B [--tol 1e-4]

Prints max |diff| / max |ref| per intermediate in forward order and marks the first one above
the tolerance — where a numerics bug enters. Dev tool; reads .npy files only.
"""
import argparse
import os
import sys

import numpy as np

# mmx trace name -> reference dump name
ALIASES = {"ffn_norm": "moe_norm", "router_logits": "moe_router_logits",
           "router_weights": "moe_router_weights"}
LAYER_ORDER = ["attn_norm", "q", "k", "v", "attn_out", "ffn_norm", "router_logits",
               "router_weights", "moe_out", "layer_out"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mmx_dir")
    ap.add_argument("ref_dir")
    ap.add_argument("--tol", type=float, default=1e-4)
    a = ap.parse_args()
    n_layers = 0
    while os.path.exists(os.path.join(a.mmx_dir, f"attn_norm.{n_layers}.npy")):
        n_layers += 1
    rows = [("embed", "embed.npy", "embed.npy")]
    for il in range(n_layers):
        for name in LAYER_ORDER:
            rows.append((f"L{il} {name}", f"{name}.{il}.npy", f"layer{il:02d}_{ALIASES.get(name, name)}.npy"))
    rows.append(("final_norm", "final_norm.npy", "final_norm.npy"))
    flagged = False
    for label, mine, ref in rows:
        pm, pr = os.path.join(a.mmx_dir, mine), os.path.join(a.ref_dir, ref)
        if not (os.path.exists(pm) and os.path.exists(pr)):
            continue
        x = np.load(pm).astype(np.float64).ravel()
        y = np.load(pr).astype(np.float64).ravel()
        if x.size != y.size:
            print(f"{label:24s} size mismatch {x.size} vs {y.size}")
            continue
        rel = np.abs(x - y).max() / max(np.abs(y).max(), 1e-30)
        mark = ""
        if rel > a.tol and not flagged:
            mark, flagged = "  <-- first above tolerance", True
        print(f"{label:24s} rel max diff {rel:.3e}{mark}")
    return 1 if flagged else 0


if __name__ == "__main__":
    sys.exit(main())
