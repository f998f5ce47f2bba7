#!/usr/bin/env python3
"""Fair queues and slow readers against the real `mmx serve` (hostile-clients issue, round 2).

  fair_admission_test.py --mmx BUILD/tools/mmx --model models/m2-tiny

Clients are told apart by address: client A connects from 127.0.0.1, client B from 127.0.0.2
(both loopback; the server listens on 127.0.0.1).

1. Fairness: A opens 64 streams (max-running 64: every slot), then B sends short streamed
   requests. B's first token must come within 4 engine steps of sending (the step in flight, B's
   own prefill step, and slack for the /metrics round trips that count them); under FIFO it would
   wait for one of A's 400-token streams to end (hundreds of steps).
2. Slow readers: A opens 300 streams and never reads (a 4 KiB receive window; the server's
   send buffer pinned to 16 KiB so the kernel does not hold megabytes), while B sends normal
   requests: every one of B's is answered; A's are cut by the 2 s write deadline, their
   generations cancelled, and the KV pages drain to 0.
3. One HTTP stack: the server process listens on its public port only (/proc, as `ss -ltnp`).
"""
import argparse
import http.client
import json
import os
import re
import socket
import statistics
import sys
import threading
import time

from mmx_serve import Serve

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def metrics(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(mmx_[a-z_]+) ([0-9.eE+-]+)$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def open_stream(port, src, body, rcvbuf=None):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    data = json.dumps(body).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
    return s


def stream_body(max_tokens):
    return {"prompt": "def read_config(path):", "max_tokens": max_tokens, "stream": True, "ignore_eos": True,
            "temperature": 0.8}


def listening_ports(pid):
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            t = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if t.startswith("socket:["):
            inodes.add(t[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            next(f)
            for line in f:
                p = line.split()
                if p[3] == "0A" and p[9] in inodes:
                    ports.add(int(p[1].split(":")[1], 16))
    return ports


def fairness(port):
    print("-- 1. fairness: 64 streams from A, short requests from B", flush=True)
    stop = threading.Event()
    a_socks = [open_stream(port, "127.0.0.1", stream_body(400)) for _ in range(64)]

    def reader(s):  # A reads normally
        s.settimeout(0.5)
        while not stop.is_set():
            try:
                if not s.recv(65536):
                    return
            except socket.timeout:
                continue
            except OSError:
                return

    threads = [threading.Thread(target=reader, args=(s,), daemon=True) for s in a_socks]
    for t in threads:
        t.start()
    t0 = time.time()
    while metrics(port).get("mmx_requests_running", 0) < 64 and time.time() - t0 < 60:
        time.sleep(0.05)
    check(metrics(port).get("mmx_requests_running", 0) == 64, "A holds all 64 running slots")
    m0, t_a = metrics(port), time.time()
    time.sleep(1.0)
    m1, t_b = metrics(port), time.time()
    step_s = (t_b - t_a) / max(1.0, m1["mmx_engine_steps_total"] - m0["mmx_engine_steps_total"])
    worst_steps, walls = 0, []
    for i in range(5):
        before = metrics(port)["mmx_engine_steps_total"]
        t_send = time.time()
        b = open_stream(port, "127.0.0.2", stream_body(2))
        got = b""
        b.settimeout(30)
        while b'"text"' not in got:  # the first event with a token
            chunk = b.recv(65536)
            if not chunk:
                break
            got += chunk
        wall = time.time() - t_send
        after = metrics(port)["mmx_engine_steps_total"]
        b.close()
        worst_steps = max(worst_steps, int(after - before))
        walls.append(wall)
        time.sleep(0.2)
    print(f"   step with 64 decoding: {1e3 * step_s:.1f} ms; B's first token: {worst_steps} steps at worst "
          f"(incl. the /metrics reads), wall {1e3 * min(walls):.0f}-{1e3 * max(walls):.0f} ms", flush=True)
    check(worst_steps <= 4, f"B's first token within 4 steps of sending (worst {worst_steps})")
    stop.set()
    for s in a_socks:
        s.close()
    t0 = time.time()
    while metrics(port).get("mmx_requests_running", 1) > 0 and time.time() - t0 < 30:
        time.sleep(0.1)


def slow_readers(port):
    print("-- 2. 300 never-reading streams from A, normal traffic from B", flush=True)
    cut0 = metrics(port)["mmx_http_slow_readers_cut_total"]
    a_socks = [open_stream(port, "127.0.0.1", stream_body(3000), rcvbuf=4096) for _ in range(300)]
    lat, statuses = [], []
    for i in range(10):
        t = time.time()
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=120, source_address=("127.0.0.2", 0))
        c.request("POST", "/v1/chat/completions",
                  json.dumps({"messages": [{"role": "user", "content": f"hello {i}"}], "max_tokens": 8}),
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        statuses.append(r.status)
        lat.append(time.time() - t)
        c.close()
    print(f"   B's 10 requests beside them: statuses {sorted(set(statuses))}, latency median "
          f"{1e3 * statistics.median(lat):.0f} ms, max {1e3 * max(lat):.0f} ms", flush=True)
    check(statuses == [200] * 10, "every normal request answered 200")
    t0 = time.time()
    m = metrics(port)
    while (m["mmx_requests_running"] > 0 or m["mmx_requests_waiting"] > 0 or m["mmx_kv_pages_used"] > 0) \
            and time.time() - t0 < 120:
        time.sleep(0.5)
        m = metrics(port)
    cut = m["mmx_http_slow_readers_cut_total"] - cut0
    print(f"   after {time.time() - t0:.1f} s: running {m['mmx_requests_running']:.0f}, waiting "
          f"{m['mmx_requests_waiting']:.0f}, KV pages {m['mmx_kv_pages_used']:.0f}, cut {cut:.0f}", flush=True)
    check(cut >= 250, f"the never-reading streams were cut by the write deadline ({cut:.0f} of 300)")
    check(m["mmx_kv_pages_used"] == 0 and m["mmx_requests_running"] == 0, "their generations cancelled, pages freed")
    for s in a_socks:
        s.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mmx", required=True)
    ap.add_argument("--model", required=True)
    args = ap.parse_args()
    srv = Serve(args.mmx, args.model, "--max-running", "64", "--max-queue", "512", "--write-timeout-ms", "2000",
                "--send-buffer-bytes", "16384", "--max-out-bytes", "16384", "--kv-pages", "4096", name="fair_admission")
    if srv.port is None:
        print("FAIL: the server did not start")
        return 1
    port = srv.port
    try:
        fairness(port)
        slow_readers(port)
        ports = listening_ports(srv.pid)
        check(ports == {port}, f"the server listens on its public port only: {sorted(ports)}")
        check(srv.alive(), "the server is still running")
    finally:
        rc = srv.stop()
        check(rc == 0, f"exit 0 on SIGTERM (got {rc})")
    print("PASS" if not failures else f"FAILED: {len(failures)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
