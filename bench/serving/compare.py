#!/usr/bin/env python3
"""Serving side by side: llama-server and `mmx serve` on the same GGUF file, the same load.

Each round starts one server, warms it with one request, then runs the load: --clients threads,
each sending --requests streaming /v1/completions requests one after another (a prompt of
--prompt-tokens token ids, distinct per request and the same for both engines, --max-tokens
generated with ignore_eos at temperature 0), and stops the server. Rounds alternate the engines.

Per request it records TTFT (send -> first streamed token) and the inter-token latencies (gaps
between streamed chunks that carry text; a token held back as an incomplete UTF-8 sequence merges
into the next gap, for both engines alike). Per run: generated tokens per second over the load's
wall time (usage.completion_tokens, or the counted chunks where a server sends no usage), TTFT and
ITL p50 / p99. The table holds the medians over rounds and the mmx / llama-server ratios.
Speed is reported, never asserted. Python standard library only.
"""
import argparse
import http.client
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, int(round(p / 100.0 * (len(xs) - 1)))))
    return xs[k]


class Server:
    """A server process on a free loopback port, its log in a file."""

    def __init__(self, name, argv_for_port, log_path, start_timeout):
        self.name = name
        self.port = free_port()
        argv = argv_for_port(self.port)
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.time() + start_timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {self.proc.returncode} while starting; see {log_path}")
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                c.request("GET", "/health")
                r = c.getresponse()
                r.read()
                if r.status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"{name} did not become healthy within {start_timeout} s; see {log_path}")

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


def stream_completion(port, prompt, max_tokens, timeout):
    """One streaming request. Returns (ttft_s, [itl_s...], completion_tokens, error)."""
    body = json.dumps({
        "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
        "stream": True, "stream_options": {"include_usage": True},
    })
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    t0 = time.perf_counter()
    c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        return None, [], 0, f"HTTP {r.status}: {r.read()[:300]!r}"
    ttft, last, itl, chunks, usage = None, None, [], 0, None
    for raw in r:
        line = raw.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            break
        ev = json.loads(data)
        if ev.get("usage"):
            usage = ev["usage"].get("completion_tokens")
        text = "".join(ch.get("text") or "" for ch in ev.get("choices") or [])
        if not text:
            continue
        now = time.perf_counter()
        chunks += 1
        if ttft is None:
            ttft = now - t0
        else:
            itl.append(now - last)
        last = now
    c.close()
    return ttft, itl, usage if usage is not None else chunks, None


def prompts_for(n_requests, n_tokens, vocab_lo, vocab_hi, seed):
    rng = random.Random(seed)
    return [[rng.randrange(vocab_lo, vocab_hi) for _ in range(n_tokens)] for _ in range(n_requests)]


def run_load(port, args, prompts):
    results, lock = [], threading.Lock()

    def client(ci):
        for k in range(args.requests):
            res = stream_completion(port, prompts[ci * args.requests + k], args.max_tokens, args.timeout)
            with lock:
                results.append(res)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    errors = [r[3] for r in results if r[3]]
    ttft = [r[0] for r in results if r[0] is not None]
    itl = [x for r in results for x in r[1]]
    gen = sum(r[2] for r in results if not r[3])
    return {
        "wall_s": wall, "requests": len(results), "errors": errors[:5], "n_errors": len(errors),
        "generated_tokens": gen, "gen_tok_s": gen / wall,
        "ttft_p50_s": pct(ttft, 50), "ttft_p99_s": pct(ttft, 99),
        "itl_p50_ms": 1000 * pct(itl, 50), "itl_p99_ms": 1000 * pct(itl, 99),
        "itl_max_ms": 1000 * max(itl) if itl else float("nan"),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-dir", required=True, help="llama.cpp build folder (bin/llama-server inside)")
    ap.add_argument("--mmx", default="build/tools/mmx")
    ap.add_argument("--gguf", required=True, help="the model file both servers load")
    ap.add_argument("--mmx-model", help="what mmx serves instead (e.g. the HF checkpoint of the same weights)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--parallel", type=int, default=8, help="sequences in flight, both servers")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--requests", type=int, default=3, help="requests per client, one after another")
    ap.add_argument("--prompt-tokens", type=int, default=200)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--vocab-range", default="1000,100000", help="prompt ids are drawn from [lo, hi)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--mmx-args", default="", help="extra `mmx serve` arguments of every mmx run (space-separated)")
    ap.add_argument("--llama-args", default="", help="extra llama-server arguments (space-separated)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per request")
    ap.add_argument("--logs", default="/tmp/serving-compare", help="server logs go here")
    ap.add_argument("--out", help="write every round as JSON here")
    ap.add_argument("--variant", action="append", default=[],
                    help="NAME=ARGS: one more mmx server with these extra arguments (repeatable), e.g. "
                         "'batch512=--max-batch-tokens 512'")
    ap.add_argument("--no-llama", action="store_true", help="mmx runs only (tuning; no ratios)")
    args = ap.parse_args()

    exe = None
    for sub in ("bin/llama-server", "build/bin/llama-server", "llama-server"):
        p = os.path.join(args.llama_dir, sub)
        if os.access(p, os.X_OK):
            exe = p
            break
    if not exe:
        sys.exit(f"compare.py: no llama-server under {args.llama_dir} (build the llama-server target)")
    if not os.access(args.mmx, os.X_OK):
        sys.exit(f"compare.py: {args.mmx} is not built (cmake --build build --target mmx)")
    os.makedirs(args.logs, exist_ok=True)
    lo, hi = (int(x) for x in args.vocab_range.split(","))
    ctx = args.parallel * (args.prompt_tokens + args.max_tokens + 64)

    def llama_argv(port):
        return [exe, "-m", args.gguf, "--host", "127.0.0.1", "--port", str(port), "-t", str(args.threads),
                "-tb", str(args.threads), "-np", str(args.parallel), "-c", str(ctx), "--no-webui",
                "--no-warmup"] + args.llama_args.split()

    def mmx_argv(extra):
        return lambda port: [args.mmx, "serve", "-m", args.mmx_model or args.gguf, "--host", "127.0.0.1",
                             "--port", str(port), "-t", str(args.threads), "--max-running", str(args.parallel),
                             "--http-threads", str(args.clients + 4)] + extra.split()

    engines = {} if args.no_llama else {"llama-server": llama_argv}
    engines["mmx"] = mmx_argv(args.mmx_args)
    for v in args.variant:
        name, _, extra = v.partition("=")
        if not name or name in engines:
            sys.exit(f"compare.py: --variant '{v}': give NAME=ARGS with a new NAME")
        engines[name] = mmx_argv(args.mmx_args + " " + extra)
    n_req = args.clients * args.requests
    rounds = {e: [] for e in engines}
    for r in range(args.rounds):
        order = list(engines) if r % 2 == 0 else list(reversed(engines))
        prompts = prompts_for(n_req, args.prompt_tokens, lo, hi, seed=1000 + r)
        warm = prompts_for(1, args.prompt_tokens, lo, hi, seed=7)[0]
        for e in order:
            log = os.path.join(args.logs, f"{e}-round{r}.log")
            print(f"round {r + 1}/{args.rounds}: {e} ...", file=sys.stderr, flush=True)
            srv = Server(e, engines[e], log, start_timeout=300)
            try:
                w = stream_completion(srv.port, warm, args.max_tokens, args.timeout)
                if w[3]:
                    raise RuntimeError(f"{e}: warm-up failed: {w[3]}")
                res = run_load(srv.port, args, prompts)
            finally:
                srv.stop()
            rounds[e].append(res)
            print(f"  {e}: {res['gen_tok_s']:.2f} tok/s, TTFT p50 {res['ttft_p50_s']:.2f} s p99 "
                  f"{res['ttft_p99_s']:.2f} s, ITL p50 {res['itl_p50_ms']:.0f} ms p99 {res['itl_p99_ms']:.0f} ms, "
                  f"errors {res['n_errors']}", file=sys.stderr, flush=True)
            if res["n_errors"]:
                print(f"  first errors: {res['errors']}", file=sys.stderr)

    def med(e, k):
        return statistics.median(x[k] for x in rounds[e])

    keys = [("gen_tok_s", "generated tok/s", True), ("ttft_p50_s", "TTFT p50 s", False),
            ("ttft_p99_s", "TTFT p99 s", False), ("itl_p50_ms", "ITL p50 ms", False),
            ("itl_p99_ms", "ITL p99 ms", False)]
    print(f"\n{args.clients} streaming clients x {args.requests} requests, {args.prompt_tokens}-token prompts, "
          f"{args.max_tokens} generated, temperature 0, -t {args.threads}, {args.parallel} in flight; "
          f"medians of {args.rounds} rounds; ratios: vs llama-server, > 1 is better for mmx\n")
    names = list(engines)
    mine = [e for e in names if e != "llama-server"]
    base = "llama-server" in engines
    print("| | " + " | ".join(names) + " |" + "".join(f" {e} vs llama-server |" for e in mine if base))
    print("|---|" + "---|" * (len(names) + (len(mine) if base else 0)))
    for k, label, higher_better in keys:
        row = f"| {label} | " + " | ".join(f"{med(e, k):.2f}" for e in names) + " |"
        if base:
            a = med("llama-server", k)
            for e in mine:
                b = med(e, k)
                ratio = (b / a) if higher_better else (a / b if b else float("nan"))
                row += f" {ratio:.2f}× |"
        print(row)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"args": vars(args), "rounds": rounds}, f, indent=1)
    bad = sum(x["n_errors"] for e in rounds for x in rounds[e])
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
