#!/usr/bin/env python3
"""A loopback Hugging Face Hub for the tests (Python 3 standard library only).

Binds 127.0.0.1 on a free port and prints the port on the first line of stdout, like
http_test_server.py, so HttpTestServer(script, args) starts it. Point HF_ENDPOINT (the CLI,
the app) or the `endpoint` argument (app/core/library) at http://127.0.0.1:<port>.

It answers from recorded answers in the Hub API's shape (tests/data/hub, see its README):

  GET /api/models?search=Q[&limit=N][&cursor=K]
        search-<q>.json (page 1) or search-<q>.<K>.json, at most N entries, with
        `Link: <...&cursor=...>; rel="next"` when that page's file exists or N cut the
        page short (the cursor "K-O" is page K from entry O); [] for a query
        without a file. <q> is the query in lower case, other characters than letters and
        digits as '-'. The other parameters (filter, sort, direction, expand) are not
        applied: the recorded answers already are what they ask for.
  GET /api/models/<owner>/<name>/tree/main[?recursive=true][&cursor=K]
        tree-<owner>--<name>.json (or .<K>.json), Link to the next page likewise; 404
        {"error": "Repository not found"} (X-Error-Code: RepoNotFound) for a repository
        without a file, 404 RevisionNotFound for a revision other than main.
  GET|HEAD /<owner>/<name>/resolve/main/<path>
        the bytes of a file given with --serve, with Range, ETag, X-Linked-Etag (its sha256)
        and X-Linked-Size as the Hub sends them; 404 EntryNotFound for anything else. A gated
        repository ("gated" not false in a search answer) answers 401 without a token and
        403 with another token than --token (X-Error-Code: GatedRepo). With --cdn, a file
        that may be had is a 302 to http://localhost:<port>/_cdn/<owner>/<name>/<path>
        instead, as the Hub redirects to its CDN: another host name, so a client must not
        send its token there.
  GET|HEAD /_cdn/<owner>/<name>/<path>   the file, without any check (the "CDN").
  GET /_requests   JSON: every request so far, "<METHOD> <path>?<query>", in order (not a
                   Hub route: tests check what was asked and that pages were followed);
                   /_requests?clear=1 answers the same and empties the list;
                   /_requests?auth=1 [{request, authorization}] (the header, null without one).

  --private OWNER/NAME   (repeatable) a private repository: its tree and files answer 401
        (X-Error-Code: RepoNotFound) without --token, as the Hub does for a private repository.
  --ignore-range  files answer 200 with the whole file whatever Range asks (a server that
        ignores Range).
  --cdn         redirect file downloads to the "CDN" above.

  --serve OWNER/NAME/PATH=FILE   (repeatable) serve FILE as PATH of that repository; its
        tree lists it with FILE's size and sha256 (computed at start-up), in place of the
        recorded entry of that path or added to the tree (made when the repository has
        none), so a download through the listing verifies.
  --data DIR    the recorded answers (default: tests/data/hub beside this script)
  --token T     the token that opens gated repositories (default: hf_test_accepted)
  --delay-search Q=SECONDS   (repeatable) the search for Q answers after SECONDS (a slow
                answer that a newer search overtakes)
"""
import argparse
import hashlib
import json
import os
import re
import sys
import threading
import time
from urllib.parse import parse_qs, parse_qsl, unquote, urlencode, urlparse

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import loopback_http  # noqa: E402  (tests/app: the servers' shared plumbing)

CHUNK = 1 << 20


def query_key(query):
    return re.sub(r"[^a-z0-9]", "-", query.lower())


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


class Hub:
    def __init__(self, data, served, token, delays, private=(), ignore_range=False, cdn=False):
        self.data = data
        self.token = token
        self.private = set(private)
        self.ignore_range = ignore_range
        self.cdn = cdn
        self.delays = {}
        for spec in delays:
            q, _, seconds = spec.rpartition("=")
            self.delays[query_key(q)] = float(seconds)
        self.lock = threading.Lock()
        self.requests = []
        # Gated repositories, from the recorded search answers.
        self.gated = set()
        for name in os.listdir(data):
            if not name.startswith("search-"):
                continue
            try:
                with open(os.path.join(data, name)) as f:
                    answer = json.load(f)
            except ValueError:
                continue  # the malformed ones
            if isinstance(answer, list):
                for entry in answer:
                    if isinstance(entry, dict) and entry.get("gated") not in (None, False):
                        self.gated.add(entry.get("id"))
        # (owner, name, path) -> (local file, size, sha256)
        self.files = {}
        for spec in served:
            where, _, local = spec.partition("=")
            parts = where.split("/", 2)
            if len(parts) != 3 or not local:
                raise SystemExit(f"--serve wants OWNER/NAME/PATH=FILE, not {spec!r}")
            self.files[tuple(parts)] = (local, os.path.getsize(local), sha256_of(local))

    def page(self, stem, number):
        """A recorded page: (answer, whether the next page exists); (None, False) without one."""
        suffix = "" if number == 1 else f".{number}"
        path = os.path.join(self.data, f"{stem}{suffix}.json")
        if not os.path.exists(path):
            return None, False
        with open(path, "rb") as f:
            body = f.read()
        return body, os.path.exists(os.path.join(self.data, f"{stem}.{number + 1}.json"))

    def tree(self, owner, name, number):
        body, more = self.page(f"tree-{owner}--{name}", number)
        served = {p: v for (o, n, p), v in self.files.items() if (o, n) == (owner, name)}
        if body is None and not served:
            return None, False
        if not served:
            return body, more
        entries = json.loads(body) if body is not None else []
        for path, (_, size, digest) in served.items():
            entry = {"type": "file", "oid": hashlib.sha1(path.encode()).hexdigest(), "size": size,
                     "lfs": {"oid": digest, "size": size, "pointerSize": 135}, "path": path}
            for i, old in enumerate(entries):
                if old.get("path") == path:
                    entries[i] = entry
                    break
            else:
                if number == 1:
                    entries.append(entry)
        return json.dumps(entries).encode(), more


class Handler(loopback_http.Handler):
    server_version = "powerhouse-hub-test-server"

    def json_answer(self, status, body, headers=None):
        all_headers = {"Content-Type": "application/json; charset=utf-8"}
        all_headers.update(headers or {})
        self.answer(status, body if isinstance(body, bytes) else json.dumps(body).encode(), all_headers)

    def error(self, status, code, message):
        self.json_answer(status, {"error": message}, {"X-Error-Code": code, "X-Error-Message": message})

    def next_link(self, url, cursor):
        # Every parameter as asked (expand repeats), the cursor replaced.
        query = [(k, v) for k, v in parse_qsl(url.query, keep_blank_values=True) if k != "cursor"]
        query.append(("cursor", cursor))
        host = self.headers.get("Host", "127.0.0.1:%d" % self.server.server_address[1])
        return '<http://%s%s?%s>; rel="next"' % (host, url.path, urlencode(query))

    def handle_request(self, head):
        self.head = head
        hub = self.server.hub
        url = urlparse(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        if url.path == "/_requests":
            with hub.lock:
                seen = list(hub.requests)
                if query.get("clear"):
                    hub.requests.clear()
            if query.get("auth"):
                return self.json_answer(200, [{"request": r, "authorization": a} for r, a in seen])
            return self.json_answer(200, [r for r, _ in seen])
        with hub.lock:
            hub.requests.append((f"{self.command} {self.path}", self.headers.get("Authorization")))
        authorized = self.headers.get("Authorization") == f"Bearer {hub.token}"

        # The cursor: "K", page K of the recorded pages, or "K-O", page K from entry O on
        # (what is left of a page that `limit` cut short).
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", query.get("cursor", "1"))
        if not match:
            return self.error(400, "BadRequest", "Invalid cursor")
        number, offset = int(match.group(1)), int(match.group(2) or 0)
        segments = [unquote(s) for s in url.path.strip("/").split("/")]

        if url.path == "/api/models":
            key = query_key(query.get("search", ""))
            time.sleep(hub.delays.get(key, 0))
            body, more = hub.page("search-" + key, number)
            if body is None:
                return self.json_answer(200, b"[]")
            next_cursor = str(number + 1) if more else None
            try:
                entries = json.loads(body)
            except ValueError:
                entries = None  # a malformed recorded answer goes out as it is
            if isinstance(entries, list):
                limit = max(1, int(query.get("limit", "1000")))
                if offset + limit < len(entries):
                    next_cursor = f"{number}-{offset + limit}"
                body = json.dumps(entries[offset:offset + limit]).encode()
            headers = {"Link": self.next_link(url, next_cursor)} if next_cursor else {}
            return self.json_answer(200, body, headers)

        if len(segments) >= 5 and segments[:2] == ["api", "models"] and segments[4] == "tree":
            owner, name = segments[2], segments[3]
            if f"{owner}/{name}" in hub.private and not authorized:
                return self.error(401, "RepoNotFound", "Repository not found")
            revision = segments[5] if len(segments) > 5 else "main"
            body, more = hub.tree(owner, name, number)
            if body is None:
                return self.error(404, "RepoNotFound", "Repository not found")
            if revision != "main":
                return self.error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
            headers = {"Link": self.next_link(url, str(number + 1))} if more else {}
            return self.json_answer(200, body, headers)

        if len(segments) >= 5 and segments[2] == "resolve":
            owner, name, revision, path = segments[0], segments[1], segments[3], "/".join(segments[4:])
            repo = f"{owner}/{name}"
            if repo in hub.private and not authorized:
                return self.error(401, "RepoNotFound", "Repository not found")
            if repo in hub.gated:
                authorization = self.headers.get("Authorization")
                if authorization is None:
                    return self.error(401, "GatedRepo",
                                      f"Access to model {repo} is restricted. You must have access to it "
                                      "and be authenticated to access it. Please log in.")
                if authorization != f"Bearer {hub.token}":
                    return self.error(403, "GatedRepo",
                                      f"Access to model {repo} is restricted and you are not in the "
                                      "authorized list. Visit https://huggingface.co/" + repo + " to ask for access.")
            served = hub.files.get((owner, name, path)) if revision == "main" else None
            if served is None:
                return self.error(404, "EntryNotFound", f"{path} does not exist on \"{revision}\"")
            if hub.cdn:
                port = self.server.server_address[1]
                location = f"http://localhost:{port}/_cdn/{owner}/{name}/{path}"
                return self.answer(302, b"", {"Location": location, "X-Linked-Etag": f'"{served[2]}"',
                                              "X-Linked-Size": str(served[1])})
            return self.send_file(*served)

        if len(segments) >= 4 and segments[0] == "_cdn":
            served = hub.files.get((segments[1], segments[2], "/".join(segments[3:])))
            if served is None:
                return self.error(404, "NotFound", "no such file")
            return self.send_file(*served)

        return self.error(404, "NotFound", "Sorry, we can't find the page you are looking for.")

    def send_file(self, local, size, digest):
        headers = {"Accept-Ranges": "bytes", "Content-Type": "application/octet-stream",
                   "ETag": f'"{digest}"', "X-Linked-Etag": f'"{digest}"', "X-Linked-Size": str(size)}
        first, last, status = 0, size - 1, 200
        asked = self.headers.get("Range", "")
        match = re.fullmatch(r"bytes=(\d+)-(\d*)", asked)
        if_range = self.headers.get("If-Range")
        if match and (if_range is None or if_range == headers["ETag"]) and not self.server.hub.ignore_range:
            first = int(match.group(1))
            last = min(int(match.group(2)) if match.group(2) else size - 1, size - 1)
            if first >= size:
                return self.answer(416, b"", {"Content-Range": f"bytes */{size}"})
            status = 206
            headers["Content-Range"] = f"bytes {first}-{last}/{size}"
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(last - first + 1))
        self.end_headers()
        if self.head:
            return
        try:
            with open(local, "rb") as f:
                f.seek(first)
                left = last - first + 1
                while left > 0:
                    block = f.read(min(CHUNK, left))
                    if not block:
                        break
                    self.wfile.write(block)
                    left -= len(block)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default=os.path.join(here, "..", "..", "data", "hub"))
    parser.add_argument("--serve", action="append", default=[])
    parser.add_argument("--token", default="hf_test_accepted")
    parser.add_argument("--delay-search", action="append", default=[])
    parser.add_argument("--private", action="append", default=[])
    parser.add_argument("--ignore-range", action="store_true")
    parser.add_argument("--cdn", action="store_true")
    args = parser.parse_args()

    def setup(server):
        server.hub = Hub(args.data, args.serve, args.token, args.delay_search, args.private, args.ignore_range,
                         args.cdn)

    loopback_http.serve(Handler, setup)


if __name__ == "__main__":
    sys.exit(main())
