"""A real HTTP receiver on loopback that verifies each request with ``standardwebhooks``
(not with agentstate's own code), and answers what the test scripts."""

import http.server
import threading
import time
from contextlib import contextmanager

from standardwebhooks import Webhook as Verifier

HANG = 0


class Receiver:
    def __init__(
        self, secret: str, statuses: list[int] | None = None, hang_first: bool = False
    ) -> None:
        self.verifier = Verifier(secret)
        self.statuses = list(statuses or [])  # answered in turn (HANG: never); then 200
        self.received: list[dict] = []  # verified bodies with their webhook-id
        self.refused = 0  # requests whose signature did not verify
        self.hang_first = hang_first  # never answer the first try of each webhook-id
        self.lock = threading.Lock()
        self.url = ""

    def handle(self, headers: dict[str, str], body: bytes) -> int:
        try:
            payload = self.verifier.verify(body, headers)
        except Exception:  # noqa: BLE001 - any verification failure
            with self.lock:
                self.refused += 1
            return 400
        with self.lock:
            first = all(b["webhook-id"] != headers["webhook-id"] for b in self.received)
            self.received.append({"webhook-id": headers["webhook-id"], **payload})
            status = self.statuses.pop(0) if self.statuses else 200
            if self.hang_first and first:
                status = HANG
        if status == HANG:  # a receiver that never answers (the sender dies meanwhile)
            time.sleep(60)
        return status


@contextmanager
def receiving(secret: str, statuses: list[int] | None = None, hang_first: bool = False):
    receiver = Receiver(secret, statuses, hang_first)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - the standard library's name
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            headers = {k.lower(): v for k, v in self.headers.items()}
            status = receiver.handle(headers, body)
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()


def kinds(receiver: Receiver) -> list[str]:
    return [body["kind"] for body in receiver.received]
