"""A local fake OpenAI-compatible chat endpoint for tests: replies come from a script."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeChatServer:
    """Serves ``POST /v1/chat/completions``; ``replies`` is a list of strings (reply text),
    ``("sleep", seconds)`` tuples, or ``("status", code[, body])`` tuples, used in order (the last repeats)."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                reply = outer.replies[min(len(outer.requests) - 1, len(outer.replies) - 1)]
                if isinstance(reply, tuple) and reply[0] == "sleep":
                    time.sleep(reply[1])
                    reply = "{}"
                if isinstance(reply, tuple) and reply[0] == "status":
                    self.send_response(reply[1])
                    self.end_headers()
                    self.wfile.write(reply[2].encode() if len(reply) > 2 else b'{"error": "boom"}')
                    return
                payload = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": reply}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                try:
                    self.wfile.write(payload)
                except BrokenPipeError:
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
