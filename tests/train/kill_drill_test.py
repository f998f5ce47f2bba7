#!/usr/bin/env python3
"""The kill -9 drill (src/train/checkpoint.h): `mmx train` killed at chosen and at random points,
inside a checkpoint write included, and resumed each time, ends with the same weights, optimizer
state and train_log.csv (timing columns aside) as an uninterrupted run, and nothing temporary left.

  kill_drill_test.py --mmx BUILD/tools/mmx [--work DIR] [--seed N]

Deterministic kills: MMX_TRAIN_KILL_AT="STEP:POINT" makes the process SIGKILL itself at that point
of that step's checkpoint. Random kills: SIGKILL from outside after a seeded random delay.
Then the damaged side files: an empty train_state.json and a corrupt state file are errors naming
the file (exit 1, no traceback-like crash), a cut model.safetensors is rewritten from the master
weights (said) and the run still ends bitwise equal.
"""
import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

STEPS = 40
RUN = ["train", "--task", "retrieval", "--task-pairs", "4", "--layers", "2", "--hidden", "32", "--heads", "2",
       "--kv-heads", "1", "--head-dim", "16", "--rotary-dim", "8", "--experts", "4", "--top-k", "2", "--ffn", "32",
       "--steps", str(STEPS), "--seq-len", "32", "--batch", "4", "--save-every", "2", "--eval-every", "4",
       "-t", "1", "--seed", "5"]
# What a resume takes from the command line rather than the run (train_state.json fixes the rest).
RESUME = ["--steps", str(STEPS), "--save-every", "2", "--eval-every", "4", "-t", "1"]
POINTS = ["state-written", "model-written", "log-synced", "manifest-tmp-written", "committed", "cleaned"]
# (step, point) in the order the kills happen. A point before the commit can be hit again at the
# same step (the resume goes back to the previous checkpoint); after the commit, only a later one.
SCHEDULE = [(2, p) for p in POINTS[:5]] + [(4, "cleaned")] + [(6, p) for p in POINTS[:4]] + \
           [(8, "committed"), (10, "state-written"), (10, "cleaned"), (12, "manifest-tmp-written"), (40, "log-synced")]
FINAL_STATE = "train_state-%08d.safetensors" % STEPS
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def attempt(mmx, d, env_kill=None, kill_after=None):
    """One invocation: a fresh run when d has no commit yet, else --resume. Returns (rc, stderr)."""
    resume = os.path.exists(os.path.join(d, "train_state.json"))
    cmd = [mmx] + (["train", "--resume", d] + RESUME if resume else RUN + ["-o", d])
    env = dict(os.environ)
    env.pop("MMX_TRAIN_KILL_AT", None)
    if env_kill:
        env["MMX_TRAIN_KILL_AT"] = env_kill
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if kill_after is not None:
        try:
            p.wait(timeout=kill_after)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGKILL)
    _, err = p.communicate(timeout=120)
    return p.returncode, err


def untimed_log(d):
    """train_log.csv without its timing columns (step_s, tokens_per_s)."""
    rows = open(os.path.join(d, "train_log.csv")).read().splitlines()
    return [",".join(r.split(",")[:7]) for r in rows]


def same_end(a, b, what):
    for f in ["model.safetensors", FINAL_STATE]:
        pa, pb = os.path.join(a, f), os.path.join(b, f)
        check(os.path.exists(pb) and open(pa, "rb").read() == open(pb, "rb").read(), f"{what}: {f} equals the uninterrupted run's")
    la, lb = untimed_log(a), untimed_log(b)
    check(la == lb and len(la) == STEPS + 1, f"{what}: train_log.csv equals the uninterrupted run's ({len(lb) - 1} rows)")
    left = [f for f in os.listdir(b) if f.endswith(".tmp") or (f.startswith("train_state-") and f != FINAL_STATE)]
    check(not left, f"{what}: nothing temporary or stale left ({left})")


def committed_step(d):
    import json
    p = os.path.join(d, "train_state.json")
    return json.load(open(p))["step"] if os.path.exists(p) else 0


def finish(mmx, d, what):
    """Resumes d to the end unless its last invocation got there."""
    if committed_step(d) == STEPS:
        return ""
    rc, err = attempt(mmx, d)
    check(rc == 0, f"{what}: the last resume finishes (rc {rc}) {err[-300:] if rc else ''}")
    return err


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mmx", required=True)
    ap.add_argument("--work", default=None)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="kill_drill_")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    straight = os.path.join(work, "straight")
    rc, err = attempt(args.mmx, straight)
    check(rc == 0, f"the uninterrupted run (rc {rc}) {err[-300:] if rc else ''}")
    t0 = time.time()
    attempt(args.mmx, os.path.join(work, "timing"))
    run_s = time.time() - t0

    # 1. Every fault point, at checkpoints early and late, one kill per invocation.
    d = os.path.join(work, "points")
    missed = []
    for step, point in SCHEDULE:
        rc, _ = attempt(args.mmx, d, env_kill=f"{step}:{point}")
        if rc != -signal.SIGKILL:
            missed.append(f"{step}:{point} (rc {rc})")
    check(not missed, f"every scheduled fault point killed its run ({len(SCHEDULE)} kills; missed: {missed})")
    finish(args.mmx, d, "fault points")
    same_end(straight, d, "fault points")

    # 2. Kills from outside at random instants (seeded), each lineage resumed until it finishes;
    # new lineages until 12 kills have landed (a kill that comes too late finds the run done).
    rng = random.Random(args.seed)
    killed = lineages = 0
    while killed < 12 and lineages < 10:
        lineages += 1
        d = os.path.join(work, f"random{lineages}")
        for _ in range(60):
            left = (STEPS - committed_step(d)) / STEPS
            rc, _ = attempt(args.mmx, d, kill_after=rng.uniform(0.1, 0.8) * run_s * left)
            killed += rc == -signal.SIGKILL
            if rc == 0 or killed >= 12:
                break
        finish(args.mmx, d, f"random kills, lineage {lineages}")
        same_end(straight, d, f"random kills, lineage {lineages}")
    print(f"     random kills: {killed} in {lineages} lineage(s) (an uninterrupted run takes {run_s:.2f} s)")
    check(killed >= 12, f"12 random kills landed ({killed})")

    # 3. Damaged side files.
    d = os.path.join(work, "damaged")
    attempt(args.mmx, d, env_kill="6:cleaned")
    manifest = os.path.join(d, "train_state.json")
    saved = open(manifest, "rb").read()
    open(manifest, "w").close()
    rc, err = attempt(args.mmx, d)
    check(rc == 1 and "train_state.json" in err and "empty" in err, f"an empty train_state.json: exit 1 naming it ({err.strip()[-200:]})")
    open(manifest, "wb").write(saved)
    state = os.path.join(d, "train_state-%08d.safetensors" % 6)
    good = open(state, "rb").read()
    open(state, "wb").write(good[:-8] + b"\0" * 8)
    rc, err = attempt(args.mmx, d)
    check(rc == 1 and os.path.basename(state) in err, f"a corrupt state file: exit 1 naming it ({err.strip()[-200:]})")
    open(state, "wb").write(good)
    model = os.path.join(d, "model.safetensors")
    with open(model, "r+b") as f:
        f.truncate(1000)
    rc, err = attempt(args.mmx, d)
    check(rc == 0, f"a cut model.safetensors: the resume finishes (rc {rc})")
    check("writing it again" in err, "a cut model.safetensors is rewritten from the master weights, and said")
    same_end(straight, d, "a cut model.safetensors")

    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{len(failures)} check(s) FAILED" if failures else "all checks passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
