"""A local stand-in for an OpenLineage HTTP endpoint (Marquez's, or Amazon DataZone's ``PostLineageEvent``) on
127.0.0.1, recording each request: its path, headers, JSON body and the body's bytes (``raw``)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Recorder(BaseHTTPRequestHandler):
    requests: list[dict[str, Any]]

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers["Content-Length"]))
        self.requests.append({"path": self.path, "headers": dict(self.headers), "body": json.loads(raw), "raw": raw})
        reply = json.dumps({"id": f"evt-{len(self.requests)}", "domainId": "dzd_test"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def recording_endpoint() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """(its URL, the requests it received so far)."""
    requests: list[dict[str, Any]] = []
    handler = type("Handler", (_Recorder,), {"requests": requests})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requests
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
