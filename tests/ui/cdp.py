"""Headless Chromium driven over its DevTools protocol with a small websocket client of our own
(the standard library only: CI installs Debian's `chromium` and nothing else). One browser per
test; a page is opened, its DOM queried with JavaScript and a screenshot taken, while it keeps
polling lf-train as a user's browser would."""
import base64, json, os, re, shutil, signal, socket, struct, subprocess, tempfile, time, urllib.parse, urllib.request


def chromium_path():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


class WebSocket:
    """RFC 6455 client frames: masked text out; text, continuation, ping and close in."""

    def __init__(self, url, timeout=30):
        m = re.match(r"ws://([^:/]+):(\d+)(/.*)", url)
        self.sock = socket.create_connection((m[1], int(m[2])), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {m[3]} HTTP/1.1\r\nHost: {m[1]}:{m[2]}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            assert chunk, "the browser closed the websocket handshake"
            head += chunk
        assert head.split(b"\r\n", 1)[0].split()[1] == b"101", head
        self.buf = head.split(b"\r\n\r\n", 1)[1]

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 20)
            assert chunk, "the browser closed the websocket"
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def send(self, text):
        data = text.encode()
        mask = os.urandom(4)
        n = len(data)
        head = struct.pack("!B", 0x81) + (struct.pack("!B", 0x80 | n) if n < 126 else
                                          struct.pack("!BH", 0x80 | 126, n) if n < 1 << 16 else
                                          struct.pack("!BQ", 0x80 | 127, n))
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def recv(self):
        message = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read(8))[0]
            payload = self._read(n)
            op = b0 & 0x0F
            if op == 0x9:  # ping
                self.sock.sendall(struct.pack("!BB", 0x8A, 0x80) + b"\0\0\0\0")
                continue
            if op == 0x8:
                raise ConnectionError("the browser closed the websocket")
            message += payload
            if b0 & 0x80:
                return message.decode()


class Page:
    def __init__(self, ws_url):
        self.ws = WebSocket(ws_url)
        self.next_id = 0

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self.next_id:
                assert "error" not in reply, reply
                return reply["result"]

    def evaluate(self, expression):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        assert "exceptionDetails" not in r, r
        return r["result"].get("value")

    def wait_for(self, expression, timeout=30, interval=0.25):
        """Polls `expression` until it is truthy; returns its value (or the last one, falsy)."""
        deadline = time.time() + timeout
        guarded = f"(() => {{ try {{ return ({expression}); }} catch (e) {{ return null; }} }})()"
        while True:
            v = self.evaluate(guarded)
            if v or time.time() > deadline:
                return v
            time.sleep(interval)

    def screenshot(self, path, width=1400):
        """The whole page, not only the window."""
        height = int(self.evaluate("document.documentElement.scrollHeight"))
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        return path


class Chromium:
    def __init__(self):
        exe = chromium_path()
        assert exe, "chromium not found: scripts/install_deps.sh installs Debian's chromium package"
        self.profile = tempfile.mkdtemp(prefix="lf-chromium-")
        self.log = open(os.path.join(self.profile, "stderr.txt"), "w+")
        self.proc = subprocess.Popen([exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                                      "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                                      "--hide-scrollbars", "--mute-audio", "--remote-debugging-port=0",
                                      f"--user-data-dir={self.profile}", "--window-size=1400,1000", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=self.log, start_new_session=True)
        deadline = time.time() + 60
        self.port = None
        while self.port is None:
            self.log.seek(0)
            m = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", self.log.read())
            if m:
                self.port = int(m[1])
                break
            assert self.proc.poll() is None and time.time() < deadline, self.stderr()
            time.sleep(0.1)

    def stderr(self):
        self.log.seek(0)
        return self.log.read()[-3000:]

    def open(self, url):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/json/new?{urllib.parse.quote(url, safe='')}",
                                     method="PUT")
        with urllib.request.urlopen(req, timeout=30) as r:
            target = json.load(r)
        return Page(target["webSocketDebuggerUrl"])

    def close(self):
        # The browser's own processes (renderer, zygote) share its session: all of them.
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)
