#!/usr/bin/env python3
"""Memory that returns (hostile-clients issue, round 2): each route's largest request of its kind,
sent 20 times, must not grow the server: RSS after the 20th within 64 MiB of RSS after the 2nd.

  route_memory_test.py --mmx BUILD/tools/mmx --model models/m2-tiny

The bodies are the worst cases for per-request scratch: a 4 MiB single "word" (BPE works on one
2-4 M-symbol piece: per-thread scratch that kept its peak grew RSS ~31 MiB a request, one HTTP
thread after another), 1.2 M CJK characters, 1 M ids to detokenize, a count_tokens prompt and
a chat prompt that fills the context. Requests go round the server's HTTP threads as a client's
would (one connection each).
"""
import argparse
import json
import sys
import urllib.error
import urllib.request

from mmx_serve import Serve

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return r.status, r.read()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mmx", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    srv = Serve(args.mmx, args.model, name="route_memory")
    port = srv.port
    try:
        if not port:
            check(False, "mmx serve starts")
            return
        cjk = "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(1_200_000))
        _, ids = post(port, "/tokenize", {"content": "def f(x):\n    return x\n" * 2000})
        ids = json.loads(ids)["tokens"]
        cases = [
            ("/tokenize one 4 MiB word", "/tokenize", {"content": "a" * (4 << 20)}),
            ("/tokenize 1.2 M CJK characters", "/tokenize", {"content": cjk}),
            ("/detokenize 1 M ids", "/detokenize", {"tokens": (ids * (1_000_000 // len(ids) + 1))[:1_000_000]}),
            ("/v1/messages/count_tokens, a prompt filling the context", "/v1/messages/count_tokens",
             {"model": "m2-tiny", "messages": [{"role": "user", "content": "def f(x):\n    return x\n" * 330}]}),
            ("/v1/chat/completions, a prompt filling the context", "/v1/chat/completions",
             {"messages": [{"role": "user", "content": "def f(x):\n    return x\n" * 330}], "max_tokens": 1}),
        ]
        for name, path, body in cases:
            after = {}
            for k in range(1, args.reps + 1):
                try:
                    status, _ = post(port, path, body)
                except urllib.error.HTTPError as e:
                    status = e.code
                    if k == 1:
                        print(f"     {name}: HTTP {e.code} {e.read()[:200]!r}")
                if k == 1:
                    check(status == 200, f"{name}: 200 ({status})")
                if k in (2, args.reps):
                    after[k] = rss_mib(srv.pid)
            grew = after[args.reps] - after[2]
            check(grew <= 64, f"{name}: RSS after {args.reps} {after[args.reps]:.0f} MiB, after 2 {after[2]:.0f} MiB "
                              f"(+{grew:.0f} MiB; bound 64)")
        check(srv.alive(), "the server is alive")
    finally:
        srv.stop()
    print(f"{len(failures)} check(s) FAILED" if failures else "all checks passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
