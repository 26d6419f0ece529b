"""What the tests' loopback HTTP servers share (Python 3 standard library only).

http_test_server.py (downloads), hub_test_server.py (the Hugging Face Hub) and
openai_fault_server.py (remote engines) bind 127.0.0.1 on a free port and print the port on
the first line of stdout, which HttpTestServer (tests/app/library/http_test_server.h) reads:
serve() does that. Handler is their quiet HTTP/1.1 handler: GET and HEAD go to
handle_request(head), and answer() sends a whole answer (no body for a HEAD).

The scripts import it with their parent folder (tests/app) on sys.path.
"""
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    head = False

    def log_message(self, format, *args):  # quiet
        pass

    def do_HEAD(self):
        self.head = True
        self.handle_request(head=True)

    def do_GET(self):
        self.head = False
        self.handle_request(head=False)

    def handle_request(self, head):
        self.answer(501)

    def answer(self, status, body=b"", headers=None, close=False):
        """Status, headers, Content-Length and the body (left out for a HEAD)."""
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
        self.end_headers()
        if not self.head and body:
            self.wfile.write(body)
        if close:
            self.close_connection = True


def serve(handler, setup=None):
    """Serves `handler` on 127.0.0.1 at a free port, printed first on stdout; `setup(server)`
    runs before (state on the server, a TLS socket). Returns when interrupted."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    if setup is not None:
        setup(server)
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
