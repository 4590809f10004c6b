#!/usr/bin/env python3
"""Soak for brigade serve: many mixed requests from concurrent clients, some
cancelled mid-stream, some malformed; then the server must still be healthy.
Usage: serve_soak.py URL N_REQUESTS N_CLIENTS. Prints a summary line
"soak: ..." and exits 1 on an unexpected answer."""
import http.client
import json
import random
import sys
import threading
import time
import urllib.parse

url = urllib.parse.urlparse(sys.argv[1])
total, clients = int(sys.argv[2]), int(sys.argv[3])
lock = threading.Lock()
counts = {}
problems = []
generated = 0
next_job = 0


def conn():
    return http.client.HTTPConnection(url.hostname, url.port, timeout=120)


def note(kind, status):
    with lock:
        counts[(kind, status)] = counts.get((kind, status), 0) + 1


def problem(msg):
    with lock:
        problems.append(msg)


def post(c, path, body):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    c.request("POST", path, data, {"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, r.read()


def plain(rng, kind):
    global generated
    c = conn()
    try:
        n = rng.randint(1, 5)
        if kind == "chat":
            body = {"messages": [{"role": "user", "content": "question %d" % rng.randint(0, 30)}],
                    "max_tokens": n, "temperature": rng.choice([0, 0.7, 1.2]), "seed": rng.randint(0, 99)}
            status, data = post(c, "/v1/chat/completions", body)
        else:
            body = {"prompt": "text %d" % rng.randint(0, 30), "max_tokens": n, "stop": ["\n\n"]}
            status, data = post(c, "/v1/completions", body)
        note(kind, status)
        if status == 200:
            j = json.loads(data)
            got = j["usage"]["completion_tokens"]
            if got > n or j["choices"][0]["finish_reason"] not in ("stop", "length", "tool_calls"):
                problem("%s: bad answer %s" % (kind, data[:200]))
            with lock:
                generated += got
        elif status != 503:
            problem("%s: status %d %s" % (kind, status, data[:200]))
    finally:
        c.close()


def stream(rng, cancel):
    global generated
    c = conn()
    try:
        body = {"messages": [{"role": "user", "content": "stream %d" % rng.randint(0, 30)}],
                "max_tokens": 100000 if cancel else rng.randint(1, 5), "stream": True,
                "stream_options": {"include_usage": True}}
        c.request("POST", "/v1/chat/completions", json.dumps(body).encode(),
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        kind = "stream-cancel" if cancel else "stream"
        note(kind, r.status)
        if r.status != 200:
            r.read()
            if r.status != 503:
                problem("%s: status %d" % (kind, r.status))
            return
        chunks, done = 0, False
        while True:
            line = r.readline()
            if not line:
                break
            line = line.strip()
            if not line:
                continue
            if line == b"data: [DONE]":
                done = True
                break
            j = json.loads(line[6:])
            chunks += 1
            if j.get("usage"):
                with lock:
                    generated += j["usage"]["completion_tokens"]
            if cancel and chunks >= rng.randint(2, 4):
                break  # hang up mid-stream
        if not cancel and not done:
            problem("stream ended without [DONE]")
    finally:
        c.close()


def misc(rng):
    c = conn()
    try:
        pick = rng.randrange(5)
        if pick == 0:
            status, _ = post(c, "/v1/chat/completions", b'{"messages": [')
            want = 400
        elif pick == 1:
            status, _ = post(c, "/v1/chat/completions",
                             {"messages": [{"role": "user", "content": "x"}], "max_tokens": -3})
            want = 400
        elif pick == 2:
            status, _ = post(c, "/tokenize", {"content": "hello %d" % rng.randint(0, 9)})
            want = 200
        elif pick == 3:
            c.request("GET", "/v1/models")
            r = c.getresponse()
            r.read()
            status, want = r.status, 200
        else:
            status, _ = post(c, "/detokenize", {"tokens": [72, 101, 108]})
            want = 200
        note("misc", status)
        if status != want:
            problem("misc %d: status %d, expected %d" % (pick, status, want))
    finally:
        c.close()


def worker(seed):
    global next_job
    rng = random.Random(seed)
    while True:
        with lock:
            if next_job >= total:
                return
            next_job += 1
        kind = rng.choices(["chat", "completion", "stream", "cancel", "misc"], [3, 2, 3, 2, 2])[0]
        try:
            if kind in ("chat", "completion"):
                plain(rng, kind)
            elif kind == "stream":
                stream(rng, False)
            elif kind == "cancel":
                stream(rng, True)
            else:
                misc(rng)
        except Exception as e:  # a dropped connection or a timeout
            problem("%s: %r" % (kind, e))


t0 = time.time()
threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
for t in threads:
    t.start()
for t in threads:
    t.join()
elapsed = time.time() - t0
summary = ", ".join("%s %d: %d" % (k, s, n) for (k, s), n in sorted(counts.items()))
print("soak: %d requests from %d clients in %.1f s, %d tokens generated (%.1f tokens/s); %s"
      % (total, clients, elapsed, generated, generated / elapsed, summary))
for p in problems[:20]:
    print("soak problem:", p)
sys.exit(1 if problems else 0)
