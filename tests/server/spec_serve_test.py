#!/usr/bin/env python3
"""`mmx serve --lookup K` (speculative decoding by prompt lookup) answers what the plain server
answers: greedy completions and chat replies, streamed and not, token for token; /metrics counts the
drafts (mmx_spec_decode_*).

  spec_serve_test.py --mmx BUILD/tools/mmx --model models/m2-tiny
"""
import argparse
import http.client
import json
import re
import sys

from mmx_serve import Serve

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def post(port, path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read().decode()
    c.close()
    return r.status, data


def metrics(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^(mmx_spec_[a-z_]+) ([0-9.eE+-]+)$", text, re.M)}


PROMPTS = ["def read_config(path):\n    with open(path) as f:\n        return f.read()\n\ndef write_config(path, data):\n",
           "import os\nimport sys\nimport os.path\n\nfor name in os.listdir(path):\n    if os.path.isdir(",
           "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n"]


def answers(port):
    out = []
    for p in PROMPTS:
        for stream in (False, True):
            st, body = post(port, "/v1/completions", {"prompt": p, "max_tokens": 48, "temperature": 0, "stream": stream})
            out.append((st, body if not stream else "".join(
                json.loads(line[6:])["choices"][0]["text"] for line in body.splitlines()
                if line.startswith("data: {"))))
        st, body = post(port, "/v1/chat/completions", {"messages": [{"role": "user", "content": p}], "max_tokens": 32,
                                                       "temperature": 0})
        out.append((st, json.loads(body)["choices"][0]["message"]["content"] if st == 200 else body))
    return [(st, re.sub(r'"(id|created)": ?[^,]+,', "", t) if isinstance(t, str) else t) for st, t in out]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mmx", required=True)
    ap.add_argument("--model", required=True)
    a = ap.parse_args()
    plain = Serve(a.mmx, a.model, name="spec_plain")
    spec = Serve(a.mmx, a.model, "--lookup", "3", name="spec_lookup")
    try:
        if plain.port is None or spec.port is None:
            check(False, "both servers start")
        else:
            ref, got = answers(plain.port), answers(spec.port)
            check(all(st == 200 for st, _ in ref + got), "every request answered 200")
            for i, (r, g) in enumerate(zip(ref, got)):
                check(r[1] == g[1], f"request {i}: --lookup 3 answers what the plain server answers")
            m = metrics(spec.port)
            print(f"     drafts {m.get('mmx_spec_decode_num_drafts_total')}, drafted "
                  f"{m.get('mmx_spec_decode_num_draft_tokens_total')}, accepted {m.get('mmx_spec_decode_num_accepted_tokens_total')}")
            check(m.get("mmx_spec_decode_num_draft_tokens_total", 0) > 0, "drafts were verified")
            check(m.get("mmx_spec_decode_num_accepted_tokens_total", 0) > 0, "some were accepted")
            check(metrics(plain.port).get("mmx_spec_decode_num_drafts_total", -1) == 0, "the plain server drafts nothing")
    finally:
        check(plain.stop() == 0 and spec.stop() == 0, "both exit 0 on SIGTERM")
    print("PASS" if not failures else f"FAILED: {len(failures)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
