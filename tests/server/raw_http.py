"""Raw HTTP for the API server's bad-request corpus (bad_requests_test.py): a `serve`
process, requests built byte by byte, and responses read off the socket (chunked bodies and
server-sent events included), so that the tests control every byte a client library would
have made correct.
"""
import argparse
import json
import signal
import socket
import subprocess
import threading

from serve_process import start_serve

# Set by the test program's command line: --cli, --model, --slow (a factor for time bounds).
ARGS = argparse.Namespace(cli=None, model=None, slow=1.0)


class Server:
    """A `serve` process on a free port of 127.0.0.1."""

    def __init__(self, *extra):
        self.proc, self.model, self.base = start_serve(ARGS.cli, ARGS.model, *extra)
        self.port = int(self.base.rsplit(":", 1)[1])
        # stderr is drained so that a chatty server never blocks on a full pipe.
        self.stderr = []
        self._drain = threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True)
        self._drain.start()

    def connect(self, timeout=60):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def alive(self):
        return self.proc.poll() is None

    def reset_peak_rss(self):
        with open(f"/proc/{self.proc.pid}/clear_refs", "w") as f:
            f.write("5")  # VmHWM = VmRSS from here on

    def rss_kib(self, field="VmRSS"):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        return 0

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)  # stop accepting, cancel what runs, exit
        try:
            status = self.proc.wait(timeout=30 * ARGS.slow)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        self._drain.join(timeout=10)
        self.proc.stdout.close()
        self.proc.stderr.close()
        return status


# ---------------------------------------------------------------------------------------
# Raw HTTP/1.1: requests written byte for byte, responses read from one buffered reader (so
# that pipelined responses can be read one after the other).

class Response:
    def __init__(self, version, status, reason, headers, body):
        self.version, self.status, self.reason, self.headers, self.body = version, status, reason, headers, body

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return f"<{self.status} {self.reason} {self.headers} {self.body[:300]!r}>"


class Closed(Exception):
    """The server closed the connection before a whole response."""


def build(method, path, body=b"", headers=None, version="HTTP/1.1", content_type="application/json",
          host=True, length=True):
    lines = [f"{method} {path} {version}"]
    if host:
        lines.append("Host: 127.0.0.1")
    if content_type and body:
        lines.append(f"Content-Type: {content_type}")
    if length and (body or method == "POST"):
        lines.append(f"Content-Length: {len(body)}")
    for k, v in (headers or {}).items():
        lines.append(f"{k}: {v}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def read_head(rfile):
    line = rfile.readline(65537)
    if not line:
        raise Closed("closed before a status line")
    version, status, *reason = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
    headers = {}
    while True:
        h = rfile.readline(65537)
        if not h:
            raise Closed("closed in the headers")
        if h in (b"\r\n", b"\n"):
            break
        k, v = h.decode("latin-1").split(":", 1)
        headers[k.strip().lower()] = v.strip()
    return version, int(status), reason[0] if reason else "", headers


def body_pieces(rfile, headers, method="GET", status=200):
    """The body as it arrives: chunk by chunk, or in one piece, or up to the close."""
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        return
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            size_line = rfile.readline(1024)
            if not size_line:
                raise Closed("closed in a chunked body")
            size = int(size_line.split(b";")[0].strip(), 16)
            if size == 0:
                while rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return
            data = rfile.read(size)
            if len(data) < size:
                raise Closed("closed in a chunk")
            rfile.readline(1024)
            yield data
    elif "content-length" in headers:
        n = int(headers["content-length"])
        data = rfile.read(n)
        if len(data) < n:
            raise Closed(f"closed after {len(data)} of {n} body bytes")
        yield data
    else:
        while True:
            data = rfile.read1(65536)
            if not data:
                return
            yield data


def read_response(rfile, method="GET"):
    version, status, reason, headers = read_head(rfile)
    return Response(version, status, reason, headers, b"".join(body_pieces(rfile, headers, method, status)))


def exchange(server, raw: bytes, method="GET", timeout=60):
    """Sends `raw` on a new connection and reads one response."""
    with server.connect(timeout) as s:
        s.sendall(raw)
        with s.makefile("rb") as rfile:
            return read_response(rfile, method)


def request(server, method, path, body=b"", headers=None, **kw):
    timeout = kw.pop("timeout", 60)
    return exchange(server, build(method, path, body, {"Connection": "close", **(headers or {})}, **kw), method,
                    timeout)


def post(server, body, path="/v1/chat/completions", **kw):
    if not isinstance(body, bytes):
        body = json.dumps(body).encode()
    return request(server, "POST", path, body, **kw)


def sse_events(rfile, headers):
    """The `data:` payloads of a server-sent event stream, as they arrive."""
    buf = b""
    for piece in body_pieces(rfile, headers, "POST"):
        buf += piece
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            for line in event.split(b"\n"):
                if line.startswith(b"data: "):
                    yield line[6:].decode()


def metrics(server):
    r = request(server, "GET", "/metrics", timeout=30)
    values = {}
    for line in r.body.decode().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def chat(model, text="hi", **kw):
    return {"model": model, "messages": [{"role": "user", "content": text}], "max_tokens": 2, "temperature": 0, **kw}
