"""A loopback stand-in for a model API (and for the NWS API the quickstart
weather server asks), for tests/real_hosts.rs.

A model request that offers a `…get_forecast` tool is answered with a call
of that tool, in the request's own wire format (Anthropic messages, OpenAI
chat completions or responses, Gemini generateContent; streamed when asked).
The weather server then asks `/points/…` here, which never answers: the
host is mid tool call, its server busy, when the test kills it. Every other
model request is held open, so the host waits with its servers up. Other
GETs get a small JSON answer so start-up goes on.

With MOCK_RETRY_TOOLLESS set, a model request without the tool before the
tool call was made gets a 529 "overloaded" (the host retries): for a host
that asks its model before its servers are connected.

Usage: python real-hosts-mock.py PORT_FILE LOG_FILE
Binds 127.0.0.1 on a free port, writes the port to PORT_FILE once listening,
and logs one line per request to LOG_FILE.
"""

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG_LOCK = threading.Lock()
ARGS = {"latitude": 38.5, "longitude": -121.5}
CALLED = False


def note(line):
    with LOG_LOCK, open(sys.argv[2], "a", encoding="utf-8") as f:
        f.write(line + "\n")


def tool_names(body):
    """Every tool name the request offers, whatever the format."""
    names = []
    for t in body.get("tools") or []:
        if not isinstance(t, dict):
            continue
        if isinstance(t.get("name"), str):
            names.append(t["name"])  # anthropic, openai responses
        fn = t.get("function")
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            names.append(fn["name"])  # openai chat
        if t.get("type") == "namespace" and isinstance(t.get("name"), str):
            # OpenAI responses: a namespace of tools (codex's `mcp__weather`).
            names += [f"{t['name']}/{n}" for n in tool_names(t)]
        for d in t.get("functionDeclarations") or t.get("function_declarations") or []:
            if isinstance(d, dict) and isinstance(d.get("name"), str):
                names.append(d["name"])  # gemini
    return names


def hold():
    while True:
        time.sleep(3600)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # noqa: N802 (http.server's name)
        pass

    def send_json(self, obj, code=200):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def send_sse(self, events):
        """`events`: (event name or None, JSON object or raw string)."""
        out = b""
        for name, data in events:
            text = data if isinstance(data, str) else json.dumps(data)
            out += ((f"event: {name}\n" if name else "") + f"data: {text}\n\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
        self.wfile.flush()

    def do_GET(self):  # noqa: N802
        note(f"GET {self.path}")
        if self.path.startswith("/points/"):
            hold()  # the weather server's NWS request: the tool call in flight
        self.send_json({"object": "list", "data": [], "models": []})

    def do_HEAD(self):  # noqa: N802
        note(f"HEAD {self.path}")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        tool = next((n for n in tool_names(body) if n.endswith("get_forecast")), None)
        names = tool_names(body)
        note(f"POST {self.path} tool={tool} stream={body.get('stream')} tools={len(names)} {names[:40]}")
        global CALLED  # noqa: PLW0603 (one tool call per host run)
        with LOG_LOCK:
            first, CALLED = not CALLED, CALLED or tool is not None
        if tool is None and not CALLED and os.environ.get("MOCK_RETRY_TOOLLESS"):
            # Before the servers are up: "overloaded", the host retries later.
            self.send_json({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded",
                                                      "code": 503, "status": "UNAVAILABLE"}}, 503)
            return
        if tool is None or not first:
            hold()
        args = json.dumps(ARGS)
        path = self.path.split("?")[0]
        if path.endswith("/messages"):
            self.anthropic(tool, body)
        elif path.endswith("/chat/completions"):
            self.chat(tool, args, body.get("stream"))
        elif path.endswith("/responses"):
            self.openai_responses(tool, args)
        elif ":generateContent" in path or ":streamGenerateContent" in path:
            self.gemini(tool, "stream" in path)
        else:
            hold()

    def anthropic(self, tool, body):
        msg = {"id": "msg_1", "type": "message", "role": "assistant", "model": body.get("model", "m"),
               "content": [], "stop_reason": None, "stop_sequence": None,
               "usage": {"input_tokens": 1, "output_tokens": 1}}
        use = {"type": "tool_use", "id": "toolu_1", "name": tool, "input": {}}
        if not body.get("stream"):
            use["input"] = ARGS
            self.send_json(dict(msg, content=[use], stop_reason="tool_use"))
            return
        self.send_sse([
            ("message_start", {"type": "message_start", "message": msg}),
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": use}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "input_json_delta", "partial_json": json.dumps(ARGS)}}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                               "usage": {"output_tokens": 1}}),
            ("message_stop", {"type": "message_stop"}),
        ])

    def chat(self, tool, args, stream):
        call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": tool, "arguments": args}}
        base = {"id": "chatcmpl-1", "created": int(time.time()), "model": "mock-model"}
        if not stream:
            self.send_json(dict(base, object="chat.completion", choices=[{
                "index": 0, "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": None, "tool_calls": [call]}}],
                usage={"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}))
            return
        chunk = dict(base, object="chat.completion.chunk")
        self.send_sse([
            (None, dict(chunk, choices=[{"index": 0, "delta": {"role": "assistant", "tool_calls": [call]},
                                         "finish_reason": None}])),
            (None, dict(chunk, choices=[{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
                        usage={"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2})),
            (None, "[DONE]"),
        ])

    def openai_responses(self, tool, args):
        namespace, _, name = tool.rpartition("/")
        item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": name, "arguments": args,
                "status": "completed"}
        if namespace:
            item["namespace"] = namespace
        resp = {"id": "resp_1", "object": "response", "created_at": int(time.time()), "model": "mock-model",
                "status": "in_progress", "output": []}
        done = dict(resp, status="completed", output=[item],
                    usage={"input_tokens": 1, "output_tokens": 1, "total_tokens": 2,
                           "input_tokens_details": {"cached_tokens": 0},
                           "output_tokens_details": {"reasoning_tokens": 0}})
        self.send_sse([
            ("response.created", {"type": "response.created", "response": resp}),
            ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                            "item": dict(item, status="in_progress", arguments="")}),
            ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
            ("response.completed", {"type": "response.completed", "response": done}),
        ])

    def gemini(self, tool, stream):
        reply = {"candidates": [{"content": {"role": "model", "parts": [
            {"functionCall": {"name": tool, "args": ARGS}}]}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
            "modelVersion": "mock-model"}
        if stream:
            self.send_sse([(None, reply)])
        else:
            self.send_json(reply)


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    with open(sys.argv[1] + ".tmp", "w", encoding="utf-8") as f:
        f.write(str(server.server_address[1]))
    os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    server.serve_forever()


if __name__ == "__main__":
    main()
