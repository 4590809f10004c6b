#!/usr/bin/env python3
"""Aggregate generation speed of a running brigade serve with C concurrent
clients (not part of make test). Each client sends completions of
MAX_TOKENS tokens, with short distinct prompts, until REQUESTS are done.
Usage: serve_bench.py URL CLIENTS REQUESTS [MAX_TOKENS]
Prints: clients, requests, generated tokens, seconds, tokens/s."""
import http.client
import json
import sys
import threading
import time
import urllib.parse

url = urllib.parse.urlparse(sys.argv[1])
clients, requests = int(sys.argv[2]), int(sys.argv[3])
max_tokens = int(sys.argv[4]) if len(sys.argv) > 4 else 32
lock = threading.Lock()
state = {"next": 0, "tokens": 0, "errors": 0}


def worker():
    c = http.client.HTTPConnection(url.hostname, url.port, timeout=600)
    while True:
        with lock:
            if state["next"] >= requests:
                break
            i = state["next"]
            state["next"] += 1
        body = {"prompt": "Request %d: once upon a time" % i, "max_tokens": max_tokens,
                "temperature": 0.8, "seed": i}
        c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        with lock:
            if r.status == 200:
                state["tokens"] += json.loads(data)["usage"]["completion_tokens"]
            else:
                state["errors"] += 1
    c.close()


t0 = time.time()
threads = [threading.Thread(target=worker) for _ in range(clients)]
for t in threads:
    t.start()
for t in threads:
    t.join()
dt = time.time() - t0
print("clients %d: %d requests, %d tokens in %.1f s: %.2f tokens/s (%d errors)"
      % (clients, requests, state["tokens"], dt, state["tokens"] / dt, state["errors"]))
