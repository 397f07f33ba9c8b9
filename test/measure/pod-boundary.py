# Attack of the pod boundary as a media URL holder would: 4 python3-websockets
# pods in tier standard behind an edge binary; 8 generic-API calls, each socket
# opened with a header or query the pod refuses; then count the ejected pods.
# Usage: go build -o /tmp/edge ./cmd/edge && /usr/bin/python3 test/measure/pod-boundary.py /tmp/edge
# (Debian python3-websockets; ports 18080, 19090 and 18082 on 127.0.0.1 free).
import json, os, socket, subprocess, sys, time, urllib.request, base64

edge_bin = sys.argv[1]
repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pods = []
for i in range(4):
    p = subprocess.Popen(["/usr/bin/python3", os.path.join(repo, "proxy", "testdata", "wspod.py")], stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline().split()
    pods.append((p, int(line[1])))
static = [{"name": f"py-{i}", "address": f"127.0.0.1:{port}", "tier": "standard"} for i, (_, port) in enumerate(pods)]
edge = subprocess.Popen([edge_bin, "--set", "listen.public=127.0.0.1:18080", "--set", "listen.admin=127.0.0.1:19090",
                         "--set", "listen.internal=127.0.0.1:18082", "--set", "pods.static=" + json.dumps(static),
                         "--set", "log.level=warn"], stdout=subprocess.DEVNULL, stderr=open(os.path.join(os.environ.get("TMPDIR", "/tmp"), "edge-pod-boundary.log"), "w"))
def get(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())
for _ in range(100):
    try:
        if len(get("http://127.0.0.1:19090/api/v1/pods")["pods"]) == 4: break
    except Exception: pass
    time.sleep(0.2)
def upgrade(url, extra):
    u = url.replace("ws://", "")
    host, path = u.split("/", 1)
    s = socket.create_connection(("127.0.0.1", 18080), timeout=5)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall(("GET /" + path + " HTTP/1.1\r\nHost: " + host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " + key + "\r\n" + extra + "\r\n").encode())
    status = s.recv(4096).split(b"\r\n")[0].decode()
    s.close()
    return status
t0 = time.time()
results = []
for i in range(8):
    req = urllib.request.Request("http://127.0.0.1:18080/api/v1/allocate", method="POST",
        data=json.dumps({"call_sid": f"CA-att-{i}", "merchant_id": "m1"}).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            a = json.loads(r.read())
    except urllib.error.HTTPError as e:
        results.append(f"allocate {e.code}"); continue
    url = a["ws_url"]
    if i % 2 == 0:
        results.append(upgrade(url, "Sec-WebSocket-Extensions: ;;;\r\n"))
    else:
        results.append(upgrade(url + "?sample-rate=44100", ""))
took = time.time() - t0
time.sleep(0.5)
p = get("http://127.0.0.1:19090/api/v1/pods")["pods"]
ejected = [x["pod_name"] for x in p if x.get("state") == "ejected"]
print(f"8 sockets in {took:.2f}s: {results}")
print(f"pods ejected: {len(ejected)} of {len(p)} {ejected}")
edge.terminate(); edge.wait()
for pr, _ in pods: pr.kill()
