#!/usr/bin/env python3
"""Soak of `tessera serve` (not a timed test): CLIENTS clients send bounded requests for DURATION
seconds on loopback (chat and completions, streamed and not, stop strings, and now and then a
stream the client abandons after its first chunk), beside a hostile mix (--hostile, on by
default): slow clients trickling request heads a byte every 3 s (reconnecting when cut off),
floods of 64 connections at once every 5 s, and clients that send a completion and drop the
connection at once. Checks that no normal request is lost (each one gets its whole answer, and
the server's /metrics counts them), that floods get answers (200 or 503), never resets, and that
the server's RSS at the end equals its RSS after the first minute within the tolerance.
Starts the server itself on 127.0.0.1 (a free port) and stops it.

  bench/serve_soak.py [--cli build/release/tessera] [--model ../shared/models/stories260K.gguf]
                      [--template tests/server/stories.jinja] [--clients 8] [--duration 600]
                      [--no-hostile]
"""
import argparse, http.client, json, os, random, re, socket, subprocess, sys, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
REQUEST_TIMEOUT = 60  # seconds: a request that takes longer counts as lost


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS for pid %d" % pid)


class Client(threading.Thread):
    def __init__(self, port, index, stop_at, stats, lock):
        super().__init__(daemon=True)
        self.port, self.rng, self.stop_at = port, random.Random(index), stop_at
        self.stats, self.lock = stats, lock

    def count(self, key, n=1):
        with self.lock:
            self.stats[key] = self.stats.get(key, 0) + n

    def one(self):
        rng = self.rng
        chat = rng.random() < 0.5
        stream = rng.random() < 0.5
        abandon = stream and rng.random() < 0.1
        body = {"max_tokens": rng.randint(8, 64), "temperature": rng.choice([0, 0.8]), "seed": rng.randint(0, 9999)}
        if rng.random() < 0.2:
            body["stop"] = [rng.choice(["Lily", ".", "park"])]
        words = " ".join(rng.choice(["Once", "upon", "a", "time", "the", "dog", "sun", "ran"]) for _ in range(rng.randint(2, 40)))
        if chat:
            path, body["messages"] = "/v1/chat/completions", [{"role": "user", "content": words}]
        else:
            path, body["prompt"] = "/v1/completions", words
        body["stream"] = stream
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=REQUEST_TIMEOUT)
        try:
            c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
            r = c.getresponse()
            if r.status != 200:
                self.count("status_%d" % r.status)
                r.read()
                return
            if not stream:
                j = json.loads(r.read())
                ok = j["choices"][0]["finish_reason"] in ("stop", "length") and j["usage"]["completion_tokens"] <= body["max_tokens"]
                self.count("ok" if ok else "bad_answer")
                if ok: self.count("tokens", j["usage"]["completion_tokens"])
                return
            done = finished = False
            chunks = 0
            while True:
                line = r.readline()
                if not line:
                    break
                if line.startswith(b"data: [DONE]"):
                    done = True
                    break
                if line.startswith(b"data: {"):
                    chunks += 1
                    j = json.loads(line[6:])
                    if j.get("choices") and j["choices"][0].get("finish_reason") in ("stop", "length"):
                        finished = True
                        if j.get("usage"): self.count("tokens", j["usage"]["completion_tokens"])
                    if abandon and chunks == 1:
                        self.count("abandoned")
                        return  # closing the connection cancels the generation
            self.count("ok" if done and finished else "bad_stream")
        except Exception as e:  # a timeout or a reset: the request is lost
            self.count("lost")
            with self.lock:
                self.stats.setdefault("errors", []).append(repr(e)[:200])
        finally:
            c.close()

    def run(self):
        while time.monotonic() < self.stop_at:
            self.count("sent")
            self.one()


class Hostile(threading.Thread):
    """One kind of hostile client, until stop_at: 'slow', 'flood' or 'drop'."""

    def __init__(self, kind, port, stop_at, stats, lock):
        super().__init__(daemon=True)
        self.kind, self.port, self.stop_at, self.stats, self.lock = kind, port, stop_at, stats, lock

    def count(self, key, n=1):
        with self.lock:
            self.stats[key] = self.stats.get(key, 0) + n

    def connect(self):
        return socket.create_connection(("127.0.0.1", self.port), timeout=30)

    def slow(self):
        s = self.connect()
        try:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            while time.monotonic() < self.stop_at:
                time.sleep(3)
                s.sendall(b"X")
        except OSError:
            self.count("slow_cut")  # the server closed it (its read timeout): as it should
        finally:
            s.close()

    def flood(self):
        def one():
            try:
                s = self.connect()
                s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                data = b""
                while True:
                    chunk = s.recv(4096)
                    if not chunk: break
                    data += chunk
                s.close()
                m = re.match(rb"HTTP/1.1 (\d+)", data)
                self.count("flood_%s" % (m.group(1).decode() if m else "empty"))
            except OSError as e:
                self.count("flood_reset")
        threads = [threading.Thread(target=one) for _ in range(64)]
        for t in threads: t.start()
        for t in threads: t.join()
        time.sleep(5)

    def drop(self):
        body = json.dumps({"prompt": "Once upon a time", "max_tokens": 64, "stream": random.random() < 0.5})
        try:
            s = self.connect()
            s.sendall(("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                       "Content-Length: %d\r\n\r\n%s" % (len(body), body)).encode())
            s.close()
            self.count("dropped")
        except OSError:
            self.count("drop_refused")
        time.sleep(1)

    def run(self):
        while time.monotonic() < self.stop_at:
            getattr(self, self.kind)()


metrics_reads = [0]


def get(port, path):
    if path == "/metrics": metrics_reads[0] += 1
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", path)
    r = c.getresponse()
    text = r.read().decode()
    c.close()
    return text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default=os.path.join(ROOT, "build/release/tessera"))
    ap.add_argument("--model", default=os.path.join(ROOT, "../shared/models/stories260K.gguf"))
    ap.add_argument("--template", default=os.path.join(ROOT, "tests/server/stories.jinja"))
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--duration", type=float, default=600, help="seconds")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--tolerance-kib", type=int, default=1024, help="RSS growth allowed after the first minute")
    ap.add_argument("--no-hostile", dest="hostile", action="store_false", help="normal clients only")
    a = ap.parse_args()
    srv = subprocess.Popen([a.cli, "serve", "-m", a.model, "--port", "0", "-np", str(a.clients), "-c", str(256 * a.clients),
                            "-t", str(a.threads), "--chat-template-file", a.template],
                           stderr=subprocess.PIPE, text=True)
    port = None
    for line in srv.stderr:
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if m: port = int(m.group(1))
        if "model loaded" in line: break
    threading.Thread(target=lambda: [None for _ in srv.stderr], daemon=True).start()  # drain the log
    stats, lock = {}, threading.Lock()
    t0 = time.monotonic()
    clients = [Client(port, i, t0 + a.duration, stats, lock) for i in range(a.clients)]
    if a.hostile:
        clients += [Hostile("slow", port, t0 + a.duration, stats, lock) for _ in range(16)]
        clients += [Hostile(kind, port, t0 + a.duration, stats, lock) for kind in ("flood", "drop")]
    try:
        for c in clients: c.start()
        warm = min(60.0, a.duration / 2)
        time.sleep(warm)
        rss_warm = rss_kib(srv.pid)
        print("RSS after %.0f s: %d KiB   (%s)" % (warm, rss_warm, os.popen("uptime").read().strip()), flush=True)
        peak = rss_warm
        def activation():
            m = re.search(r"\ntessera_activation_bytes (\d+)", get(port, "/metrics"))
            return int(m.group(1)) // 1024 if m else -1
        print("  t=%4.0f s  RSS %d KiB  activations %d KiB" % (time.monotonic() - t0, rss_warm, activation()), flush=True)
        last = time.monotonic()
        while any(c.is_alive() for c in clients):
            time.sleep(5)
            peak = max(peak, rss_kib(srv.pid))
            if time.monotonic() - last >= 60:
                last = time.monotonic()
                print("  t=%4.0f s  RSS %d KiB  activations %d KiB" % (last - t0, rss_kib(srv.pid), activation()), flush=True)
        for c in clients: c.join(REQUEST_TIMEOUT)
        time.sleep(1)  # the last requests' slots settle
        rss_end = rss_kib(srv.pid)
        metrics = get(port, "/metrics")
        elapsed = time.monotonic() - t0
        print("RSS at the end (%.0f s): %d KiB, peak %d KiB   (%s)" % (elapsed, rss_end, peak, os.popen("uptime").read().strip()))
        answered = {m.group(1): int(m.group(2)) for m in re.finditer(r'tessera_requests_total\{status="(\d+)"\} (\d+)', metrics)}
        errors = stats.pop("errors", [])
        print("client counts:", json.dumps(stats, sort_keys=True))
        print("server counts (requests by status):", json.dumps(answered, sort_keys=True))
        print("generated tokens: %d (%.1f tokens/s)" % (stats.get("tokens", 0), stats.get("tokens", 0) / elapsed))
        problems = []
        sent = stats.get("sent", 0)
        accounted = stats.get("ok", 0) + stats.get("abandoned", 0)
        if accounted != sent:
            problems.append("%d of %d requests were not answered in full" % (sent - accounted, sent))
        # The soak's own /metrics reads are answered with 200 too (the last one is counted after it ran),
        # and so are the floods' /health requests; abandoned streams are logged 499; a dropped
        # request whose generation ended before the drop was seen is a 200 too.
        own = metrics_reads[0] - 1 + stats.get("flood_200", 0)
        normal = stats.get("ok", 0)
        got = answered.get("200", 0) - own
        if not normal <= got <= normal + stats.get("dropped", 0):
            problems.append("the server answered %d requests with 200, the clients got %d answers" % (got, normal))
        if stats.get("flood_reset", 0) or stats.get("flood_empty", 0):
            problems.append("%d flood connections were reset or got nothing" % (stats.get("flood_reset", 0) + stats.get("flood_empty", 0)))
        if rss_end - rss_warm > a.tolerance_kib:
            problems.append("RSS grew by %d KiB after the first minute (tolerance %d KiB)" % (rss_end - rss_warm, a.tolerance_kib))
        for e in errors[:5]: print("  error:", e)
        if srv.poll() is not None:
            problems.append("the server exited with %s" % srv.returncode)
        print("FAIL: " + "; ".join(problems) if problems else
              "PASS: %d requests, none lost; RSS %d -> %d KiB (%+d KiB, tolerance %d KiB)" %
              (sent, rss_warm, rss_end, rss_end - rss_warm, a.tolerance_kib))
        return 1 if problems else 0
    finally:
        srv.terminate()
        srv.wait(timeout=60)


if __name__ == "__main__":
    sys.exit(main())
