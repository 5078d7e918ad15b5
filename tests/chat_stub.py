"""Loopback OpenAI-compatible chat-completions servers for judge tests: the HTTP plumbing
the tests' servers share (a quiet handler with JSON helpers, a server on a free port in a
daemon thread); each test's server says only how it answers."""

import http.server
import json
import threading


class ChatHandler(http.server.BaseHTTPRequestHandler):
  """A request handler that logs nothing; subclasses define do_POST."""

  def log_message(self, *args):
    pass

  def read_json(self) -> dict:
    return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

  def send_json(self, code: int, body, headers=()):
    """`body` as JSON (bytes are sent as they are: garbage replies)."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    self.send_response(code)
    self.send_header("Content-Type", "application/json")
    for k, v in headers:
      self.send_header(k, v)
    self.send_header("Content-Length", str(len(raw)))
    self.end_headers()
    try:
      self.wfile.write(raw)
    except BrokenPipeError:  # the client gave up first (a time-out)
      pass


def completion(content: str, model: str = "judge-model") -> dict:
  """A minimal chat.completion body answering `content`."""
  return {"id": "x", "object": "chat.completion", "model": model,
          "choices": [{"index": 0, "finish_reason": "stop",
                       "message": {"role": "assistant", "content": content}}]}


class Loopback:
  """`handler` served on a free 127.0.0.1 port from a daemon thread; `url` is its /v1."""

  def __init__(self, handler, poll_interval: float = 0.5):
    self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
    threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": poll_interval},
                     daemon=True).start()

  def close(self):
    self.httpd.shutdown()
    self.httpd.server_close()
