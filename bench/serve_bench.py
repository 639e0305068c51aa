#!/usr/bin/env python3
"""Benchmark of `tessera serve` (not a test): aggregate generation throughput with 1, 2, 4 and 8
concurrent clients (128 tokens each), and the time to first token of a 512-token prompt alone and
while 3 other clients generate. Starts the server itself on 127.0.0.1 (a free port) and stops it.
With -r N each figure is the median of N runs (the shared machines are noisy).

  bench/serve_bench.py [--cli build/release/tessera] [--model /work/bench-models/m250-q4_0.gguf] [-t N] [-r N]
"""
import argparse, http.client, json, os, random, re, statistics, subprocess, sys, threading, time


def post(port, body, stream=False):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    return c, c.getresponse()


def generate(port, prompt, n, out, i):
    c, r = post(port, {"prompt": prompt, "max_tokens": n, "temperature": 0, "ignore_eos": True})
    j = json.loads(r.read())
    c.close()
    out[i] = j["usage"]["completion_tokens"]


def cpu_seconds(pid):
    # utime + stime of the server (all its threads): less sensitive to other load than wall time.
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def throughput(port, clients, n):
    out = [0] * clients
    threads = [threading.Thread(target=generate, args=(port, "Once upon a time %d" % i, n, out, i))
               for i in range(clients)]
    t0 = time.perf_counter()
    for t in threads: t.start()
    for t in threads: t.join()
    dt = time.perf_counter() - t0
    return sum(out), dt


def ttft(port, n_prompt, others, n_other, seed):
    out = [0] * others
    threads = [threading.Thread(target=generate, args=(port, "The little dog %d" % i, n_other, out, i))
               for i in range(others)]
    for t in threads: t.start()
    if others: time.sleep(1.0)  # the others are generating
    rng = random.Random(seed)  # a new prompt each time: no slot holds a prefix of it
    prompt = [1] + [rng.randrange(300, 30000) for _ in range(n_prompt - 1)]
    t0 = time.perf_counter()
    c, r = post(port, {"prompt": prompt, "max_tokens": 8, "temperature": 0, "stream": True, "ignore_eos": True})
    first = None
    while True:
        line = r.readline()
        if not line: break
        if line.startswith(b"data: {") and first is None and b'"text":""' not in line:
            first = time.perf_counter() - t0
    c.close()
    for t in threads: t.join()
    return first


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default="build/release/tessera")
    ap.add_argument("--model", default="/work/bench-models/m250-q4_0.gguf")
    ap.add_argument("-t", "--threads", type=int, default=0)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-r", "--repeat", type=int, default=1, help="runs per figure (medians)")
    a = ap.parse_args()
    srv = subprocess.Popen([a.cli, "serve", "-m", a.model, "--port", "0", "-np", "8", "-c", str(8 * 1024),
                            "-t", str(a.threads)], stderr=subprocess.PIPE, text=True)
    port = None
    for line in srv.stderr:
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if m: port = int(m.group(1))
        if "model loaded" in line: break
    threading.Thread(target=lambda: [None for _ in srv.stderr], daemon=True).start()  # drain the log
    try:
        throughput(port, 1, 8)  # warm-up
        print("| clients | tokens | seconds | tokens/s | vs 1 client | server CPU ms/token | vs 1 client | load |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        base = base_cpu = None
        for clients in (1, 2, 4, 8):
            runs = []
            for _ in range(a.repeat):
                c0 = cpu_seconds(srv.pid)
                tokens, dt = throughput(port, clients, a.n)
                runs.append((tokens / dt, 1000 * (cpu_seconds(srv.pid) - c0) / tokens, dt, tokens))
            tps = statistics.median(r[0] for r in runs)
            cpu_ms = statistics.median(r[1] for r in runs)
            dt = statistics.median(r[2] for r in runs)
            base, base_cpu = base or tps, base_cpu or cpu_ms
            print("| %d | %d | %.1f | %.2f | %.2fx | %.1f | %.2fx | %.1f |" %
                  (clients, runs[0][3], dt, tps, tps / base, cpu_ms, base_cpu / cpu_ms, os.getloadavg()[0]), flush=True)
        alone = statistics.median(ttft(port, 512, 0, a.n, 7 + i) for i in range(a.repeat))
        busy = statistics.median(ttft(port, 512, 3, a.n, 1007 + i) for i in range(a.repeat))
        print("\nTTFT of a 512-token prompt: %.0f ms alone, %.0f ms while 3 clients generate (%.2fx; load %.1f)" %
              (1000 * alone, 1000 * busy, busy / alone, os.getloadavg()[0]))
    finally:
        srv.terminate()
        srv.wait(timeout=60)


if __name__ == "__main__":
    sys.exit(main())
