#!/usr/bin/env python3
"""A misbehaving HTTP server for the download tests (Python 3 standard library only).

Binds 127.0.0.1 on a free port and prints the port on the first line of stdout. Serves a
deterministic pseudo-random payload (--size bytes; version N of it is the concatenation of
sha256("powerhouse-test-payload-N-<i>") for i = 0, 1, ..., so the C++ tests compute the
same bytes) and misbehaves as the path asks:

  /ok               the payload, ranges honoured (single "bytes=N-" or "bytes=N-M"),
                    If-Range against a strong ETag "v1" and a Last-Modified date
  /hf               as /ok, plus X-Linked-Etag: "<sha256>" and X-Linked-Size (Hugging Face)
  /etag-hash        as /ok, with the ETag being the quoted sha256 of the payload
  /latin1-etag      as /ok, with an ETag holding a byte that is not UTF-8 ("v1" and 0xE9)
  /named            as /hf, plus Content-Disposition: attachment; filename="named-model.gguf"
  /drop?at=A,B      request k (per id, from 0) drops the connection when it has sent the
                    payload up to absolute offset at[k]; later requests behave
  /stall?at=A,B     request k sends up to at[k], then sends nothing more (for 20 s)
  /ignore-range     answers every Range request with 200 and the whole payload
  /416              answers every Range request with 416
  /etag-changes     request k serves payload version k+1 with ETag "v<k+1>": a resumed
                    download's If-Range never matches, and the bytes differ
  /corrupt          the right length with wrong bytes, X-Linked-Etag of the right bytes
  /flaky?fail=N     the first N requests get 503, then as /hf
  /404, /500, /203  those statuses, always (203: a success that is not the file)
  /blob/<file>      200 with a small HTML page, as a code host's page about a file is
  /redirect?to=P    302 to path P (the other query parameters are passed on); with
                    linked=1 the 302 carries X-Linked-Etag, as Hugging Face's does
  /<org>/<repo>/resolve/<rev>/<file>     as /hf
  /api/models/<org>/<repo>/tree/<rev>    a canned listing of GGUF files (tree API shape)
  /stats?id=X       JSON: requests, range_requests, ranges (first byte asked for, per
                    request; null without Range), if_range values, bytes_sent, statuses

Every path but /stats also takes: id=X (the counters and the "request k" above are per
id, so tests do not disturb each other), drop=... and stall=... (as at= above, on any
route), hash=linked|etag (add a server hash to /ok-like routes).
"""
import argparse
import hashlib
import json
import socket
import sys
import os
import threading
import time
from urllib.parse import parse_qs, urlencode, urlparse

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import loopback_http  # noqa: E402  (tests/app: the servers' shared plumbing)

LAST_MODIFIED = "Wed, 01 Jan 2025 00:00:00 GMT"
CHUNK = 64 * 1024


def make_payload(version, size):
    blocks = []
    for i in range((size + 31) // 32):
        blocks.append(hashlib.sha256(f"powerhouse-test-payload-{version}-{i}".encode()).digest())
    return b"".join(blocks)[:size]


class State:
    def __init__(self, size):
        self.size = size
        self.lock = threading.Lock()
        self.payloads = {}
        self.counters = {}

    def payload(self, version):
        with self.lock:
            if version not in self.payloads:
                self.payloads[version] = make_payload(version, self.size)
            return self.payloads[version]

    def stats(self, key):
        with self.lock:
            return self.counters.setdefault(key, {
                "requests": 0, "range_requests": 0, "ranges": [], "if_range": [],
                "bytes_sent": 0, "statuses": []})

    def begin(self, key, first_byte, if_range):
        """Counts a request; returns its number k (from 0) for this id."""
        s = self.stats(key)
        with self.lock:
            k = s["requests"]
            s["requests"] += 1
            s["ranges"].append(first_byte)
            s["if_range"].append(if_range)
            if first_byte is not None:
                s["range_requests"] += 1
            return k

    def record(self, key, status=None, sent=0):
        s = self.stats(key)
        with self.lock:
            if status is not None:
                s["statuses"].append(status)
            s["bytes_sent"] += sent


def int_list(value):
    return [int(x) for x in value.split(",") if x != ""] if value else []


def parse_range(header, size):
    """'bytes=N-' or 'bytes=N-M' -> (first, last); None when absent or unparsable."""
    if not header or not header.startswith("bytes="):
        return None
    spec = header[len("bytes="):]
    if "," in spec or "-" not in spec:
        return None
    first, _, last = spec.partition("-")
    if first == "":
        return None
    first = int(first)
    last = int(last) if last else size - 1
    return first, min(last, size - 1)


class Handler(loopback_http.Handler):
    server_version = "powerhouse-test-server"

    def simple(self, status, body=b"", headers=None):
        self.answer(status, body, headers, close=True)

    def handle_request(self, head):
        self.head = head
        state = self.server.state
        url = urlparse(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        key = query.get("id", "default")
        path = url.path

        if path == "/stats":
            return self.simple(200, json.dumps(state.stats(key)).encode(),
                               {"Content-Type": "application/json"})
        if path.startswith("/api/models/"):
            return self.tree_listing(path)

        rng = parse_range(self.headers.get("Range"), state.size)
        if_range = self.headers.get("If-Range")
        k = state.begin(key, rng[0] if rng else None, if_range)

        if path.startswith("/blob/"):
            state.record(key, 200)
            return self.simple(200, b"\n<!DOCTYPE html>\n<html><body>a page about the file</body></html>\n",
                               {"Content-Type": "text/html; charset=utf-8"})

        if path == "/404":
            state.record(key, 404)
            return self.simple(404, b"no such file\n")
        if path == "/500":
            state.record(key, 500)
            return self.simple(500, b"server error\n")
        if path == "/203":
            state.record(key, 203)
            return self.simple(203, b"a proxy's rewrite of something\n")
        if path == "/flaky" and k < int(query.get("fail", "0")):
            state.record(key, 503)
            return self.simple(503, b"try later\n")
        if path == "/redirect":
            target = query.pop("to", "/ok")
            headers = {"Location": target + ("?" + urlencode(query) if query else "")}
            if query.pop("linked", None):
                # Hugging Face puts the file's hash on the redirect, not on the CDN's answer.
                headers["X-Linked-Etag"] = '"%s"' % hashlib.sha256(state.payload(1)).hexdigest()
                headers["Location"] = target + ("?" + urlencode(query) if query else "")
            state.record(key, 302)
            return self.simple(302, b"", headers)

        parts = path.strip("/").split("/")
        is_resolve = len(parts) >= 5 and parts[2] == "resolve"
        routes = {"/ok", "/hf", "/etag-hash", "/latin1-etag", "/named", "/drop", "/stall", "/ignore-range", "/416",
                  "/etag-changes", "/corrupt", "/flaky"}
        if path not in routes and not is_resolve:
            state.record(key, 404)
            return self.simple(404, b"unknown test route\n")

        version = k + 1 if path == "/etag-changes" else 1
        payload = state.payload(version)
        if path == "/corrupt":
            body = bytearray(payload)
            for offset in range(1000, len(body), len(body) // 7):
                body[offset] ^= 0x5A
            body = bytes(body)
        else:
            body = payload
        sha = hashlib.sha256(payload).hexdigest()
        etag = f'"v{version}"'
        last_modified = LAST_MODIFIED.replace("2025", str(2024 + version))
        headers = {"Accept-Ranges": "bytes", "Last-Modified": last_modified, "ETag": etag,
                   "Content-Type": "application/octet-stream"}
        hash_kind = query.get("hash", "linked" if path in ("/hf", "/named", "/corrupt", "/flaky")
                              or is_resolve else "")
        if hash_kind == "linked":
            headers["X-Linked-Etag"] = f'"{sha}"'
            headers["X-Linked-Size"] = str(len(payload))
        if path == "/etag-hash" or hash_kind == "etag":
            headers["ETag"] = f'"{sha}"'
        if path == "/latin1-etag":
            headers["ETag"] = '"v1\xe9"'  # http.server writes headers as Latin-1: the byte 0xE9
        if path == "/named":
            headers["Content-Disposition"] = 'attachment; filename="named-model.gguf"'

        honour_range = rng is not None and path != "/ignore-range"
        if honour_range and if_range is not None and if_range not in (headers["ETag"], last_modified):
            honour_range = False  # the file changed: the whole of it
        if honour_range and path == "/416":
            state.record(key, 416)
            return self.simple(416, b"", {"Content-Range": f"bytes */{len(body)}"})
        if honour_range and rng[0] >= len(body):
            state.record(key, 416)
            return self.simple(416, b"", {"Content-Range": f"bytes */{len(body)}"})

        if honour_range:
            first, last = rng
            status = 206
            headers["Content-Range"] = f"bytes {first}-{last}/{len(body)}"
        else:
            first, last = 0, len(body) - 1
            status = 200
        drops = int_list(query.get("at") if path == "/drop" else query.get("drop"))
        stalls = int_list(query.get("at") if path == "/stall" else query.get("stall"))
        drop_at = drops[k] if k < len(drops) else None
        stall_at = stalls[k] if k < len(stalls) else None

        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(last - first + 1))
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        state.record(key, status)
        if head:
            return
        position = first
        try:
            while position <= last:
                end = min(last + 1, position + CHUNK)
                for limit in (drop_at, stall_at):
                    if limit is not None and position < limit < end:
                        end = limit
                if end > position:
                    self.wfile.write(body[position:end])
                    state.record(key, sent=end - position)
                    position = end
                if drop_at is not None and position >= drop_at:
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if stall_at is not None and position >= stall_at:
                    self.wfile.flush()
                    time.sleep(20)
                    return
        except (BrokenPipeError, ConnectionResetError):
            return

    def tree_listing(self, path):
        # /api/models/<org>/<repo>/tree/<rev>: files as the Hugging Face API lists them.
        parts = path.strip("/").split("/")
        if len(parts) < 6 or parts[4] != "tree":
            return self.simple(404, json.dumps({"error": "Repository not found"}).encode())
        payload = self.server.state.payload(1)
        sha = hashlib.sha256(payload).hexdigest()

        def lfs_file(name, size, oid):
            return {"type": "file", "oid": hashlib.sha1(name.encode()).hexdigest(), "size": size,
                    "path": name, "lfs": {"oid": oid, "size": size, "pointerSize": 135}}

        def fake_oid(name):
            return hashlib.sha256(name.encode()).hexdigest()

        listing = [
            {"type": "file", "oid": "1" * 40, "size": 1519, "path": ".gitattributes"},
            {"type": "file", "oid": "2" * 40, "size": 5120, "path": "README.md"},
            lfs_file("tiny-model-Q4_K_M.gguf", len(payload), sha),
            lfs_file("tiny-model-Q8_0.gguf", 8 * 1024 * 1024, fake_oid("q8")),
            {"type": "directory", "oid": "3" * 40, "size": 0, "path": "F16"},
            lfs_file("F16/tiny-model-F16-00001-of-00002.gguf", 9 * 1024 * 1024, fake_oid("f16-1")),
            lfs_file("F16/tiny-model-F16-00002-of-00002.gguf", 7 * 1024 * 1024, fake_oid("f16-2")),
        ]
        return self.simple(200, json.dumps(listing).encode(), {"Content-Type": "application/json"})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=4 * 1024 * 1024 + 12345)
    args = parser.parse_args()

    def setup(server):
        server.state = State(args.size)
        server.state.payload(1)

    loopback_http.serve(Handler, setup)


if __name__ == "__main__":
    sys.exit(main())
