"""Round trips of cheap API calls against a release `cairn serve` (stdlib only; one keep-alive
client). Usage: bench-api-latency.py CAIRN_BINARY PORT (the server gets a fresh data dir)."""
import http.client, json, os, shutil, subprocess, sys, tempfile, time
binary, port = sys.argv[1], int(sys.argv[2])
data = tempfile.mkdtemp(prefix="cairn-api-latency-")
env = dict(os.environ, CAIRN_DATA_DIR=data)
srv = subprocess.Popen([binary, "serve", "--bind", f"127.0.0.1:{port}"], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    for _ in range(600):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5); c.request("GET", "/readyz")
            if c.getresponse().status == 200: break
        except OSError: pass
        if srv.poll() is not None: sys.exit(f"cairn serve exited with {srv.returncode}")
        time.sleep(0.1)
    else:
        sys.exit("cairn serve did not answer /readyz within 60 s")
    token = open(os.path.join(data, "initial-token")).read().strip()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    def post(path, body, extra=None):
        h = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
             "Accept": "application/json, text/event-stream"}
        h.update(extra or {})
        c.request("POST", path, json.dumps(body), h)
        r = c.getresponse(); b = r.read()
        assert r.status in (200, 202), (r.status, b[:300])
        return r, b
    def bench(name, fn, n):
        for _ in range(50): fn()
        ts = []
        for _ in range(n):
            t = time.perf_counter(); fn(); ts.append((time.perf_counter() - t) * 1e3)
        ts.sort()
        print(f"{name:28} p50 {ts[len(ts)//2]:.3f} ms  p95 {ts[int(len(ts)*0.95)]:.3f} ms")
    bench("graphql {__typename}", lambda: post("/graphql", {"query": "{__typename}"}), 2000)
    r, _ = post("/mcp", {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "lat", "version": "1"}}})
    sid = r.getheader("mcp-session-id")
    hs = {"mcp-session-id": sid} if sid else {}
    post("/mcp", {"jsonrpc": "2.0", "method": "notifications/initialized"}, hs)
    bench("mcp tools/list", lambda: post("/mcp", {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, hs), 500)
    bench("mcp knowledge_summary", lambda: post("/mcp", {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
          "params": {"name": "knowledge_summary", "arguments": {}}}, hs), 500)
finally:
    srv.terminate(); srv.wait()
    shutil.rmtree(data, ignore_errors=True)
