#!/usr/bin/env python3
# A logging proxy between an Anthropic client (Claude Code) and `mmx serve`, for the agent tests:
#   anthropic_proxy.py UPSTREAM_PORT LOG.jsonl PORT_FILE [--force-tool NAME] [--short-answer]
# Listens on an ephemeral loopback port (written to PORT_FILE), forwards every request to
# 127.0.0.1:UPSTREAM_PORT unchanged and appends {"path", "headers", "body", "sent", "status", "error"} per request
# to LOG.jsonl ("body" as the client sent it, "sent" as forwarded, "error" the reply of a non-200). --force-tool NAME: the first POST /v1/messages whose tools include NAME is sent
# with tool_choice {"type": "tool", "name": NAME} (a random-weight model never calls a tool by
# itself; this makes the constrained decoder write the call). --short-answer: every other POST
# /v1/messages gets output_config.format {"type": "json_schema", "schema": {"type": "boolean"}}
# (the reply is `true` or `false`, then the end of the turn: a random model, left alone, writes
# until max_tokens, which Claude Code reports as an error). The reply is read whole, then
# relayed (SSE included), so the client sees the server's bytes and status as they were.
import http.client
import http.server
import json
import sys

UPSTREAM = int(sys.argv[1])
LOG = sys.argv[2]
PORT_FILE = sys.argv[3]
ARGS = sys.argv[4:]
FORCE = ARGS[ARGS.index("--force-tool") + 1] if "--force-tool" in ARGS else None
SHORT = "--short-answer" in ARGS
forced = False


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def relay(self, method):
        global forced
        body = self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
        parsed = None
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            pass
        original = json.loads(json.dumps(parsed))
        if (FORCE and not forced and method == "POST" and self.path.split("?")[0] == "/v1/messages"
                and isinstance(parsed, dict) and any(t.get("name") == FORCE for t in parsed.get("tools") or [])):
            forced = True
            parsed["tool_choice"] = {"type": "tool", "name": FORCE}
            body = json.dumps(parsed).encode()
        elif SHORT and method == "POST" and self.path.split("?")[0] == "/v1/messages" and isinstance(parsed, dict):
            parsed.setdefault("output_config", {})["format"] = {"type": "json_schema", "schema": {"type": "boolean"}}
            body = json.dumps(parsed).encode()
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() not in ("host", "content-length", "connection", "accept-encoding")}
        headers["Content-Length"] = str(len(body))
        conn = http.client.HTTPConnection("127.0.0.1", UPSTREAM, timeout=300)
        conn.request(method, self.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        with open(LOG, "a") as f:
            f.write(json.dumps({"path": self.path, "headers": dict(self.headers), "body": original,
                                "sent": parsed, "status": resp.status,
                                "error": None if resp.status == 200 else data.decode(errors="replace")}) + "\n")
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        conn.close()

    def do_POST(self):
        self.relay("POST")

    def do_GET(self):
        self.relay("GET")

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
with open(PORT_FILE, "w") as f:
    f.write(str(server.server_address[1]))
server.serve_forever()
