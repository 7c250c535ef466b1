#!/usr/bin/env python3
"""check_view.py — `kdflow view` pages tested in a real browser: Debian's headless chromium,
driven over the DevTools protocol on a pipe (--remote-debugging-pipe; stdlib only).

    check_view.py KDFLOW [--sample DIR]... [--synthetic N] [--screenshots DIR] [--times FILE]

For each page: it loads from disk with no console error, no exception and no request that
is not the file itself; one kernel element per launch; selecting a kernel shows each of its
buffer arguments with the access `kdflow explain` prints; search finds a kernel by name;
folding a node hides its kernels. A screenshot of each page is written (--screenshots); the
time to the first frame with the graph painted is printed (and written as JSON with
--times, for docs/benchmarks.md: not asserted). --synthetic N also checks a graph of N copies
of resnet18_tuned (bench/make_synthetic.py). Exit 77 (ctest: skipped) without chromium.
"""
import argparse
import base64
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Browser:
    """Headless chromium over --remote-debugging-pipe: fd 3 is its input, fd 4 its output."""

    def __init__(self, exe, width=1600, height=1000):
        to_r, to_w = os.pipe()
        from_r, from_w = os.pipe()
        # Move the child's ends out of the way of 3 and 4 before dup2 onto them.
        hi_r = fcntl_dup(to_r, 10)
        hi_w = fcntl_dup(from_w, 10)

        def child():
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        self.profile = tempfile.mkdtemp(prefix="kdflow-view-chromium-")
        args = [exe, "--headless=new", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--user-data-dir=" + self.profile, f"--window-size={width},{height}", "about:blank"]
        self.proc = subprocess.Popen(args, preexec_fn=child, pass_fds=(3, 4), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        for fd in (to_r, from_w, hi_r, hi_w):
            os.close(fd)
        self.out = os.fdopen(to_w, "wb", buffering=0)
        self.inp = os.fdopen(from_r, "rb", buffering=0)
        self.next_id = 0
        self.replies = {}
        self.events = queue.Queue()
        self.lock = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        self.width, self.height = width, height

    def _read(self):
        buf = b""
        while True:
            chunk = self.inp.read(1 << 16)
            if not chunk:
                with self.lock:
                    self.replies[-1] = None
                    self.lock.notify_all()
                return
            buf += chunk
            while b"\0" in buf:
                msg, buf = buf.split(b"\0", 1)
                m = json.loads(msg)
                if "id" in m:
                    with self.lock:
                        self.replies[m["id"]] = m
                        self.lock.notify_all()
                else:
                    self.events.put(m)

    def call(self, method, params=None, session=None, timeout=120):
        self.next_id += 1
        i = self.next_id
        msg = {"id": i, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.out.write(json.dumps(msg).encode() + b"\0")
        end = time.time() + timeout
        with self.lock:
            while i not in self.replies:
                if -1 in self.replies:
                    raise RuntimeError("chromium exited")
                left = end - time.time()
                if left <= 0:
                    raise RuntimeError(f"no reply to {method} in {timeout} s")
                self.lock.wait(left)
            m = self.replies.pop(i)
        if "error" in m:
            raise RuntimeError(f"{method}: {m['error']}")
        return m.get("result", {})

    def close(self):
        try:
            self.call("Browser.close", timeout=10)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)


def fcntl_dup(fd, lowest):
    import fcntl
    return fcntl.fcntl(fd, fcntl.F_DUPFD, lowest)


class Page:
    def __init__(self, browser):
        self.b = browser
        self.target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.s = browser.call("Target.attachToTarget", {"targetId": self.target, "flatten": True})["sessionId"]
        self.problems = []
        self.requests = []
        for domain in ("Runtime", "Log", "Page", "Network"):
            self.call(domain + ".enable")
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": browser.width, "height": browser.height, "deviceScaleFactor": 1, "mobile": False})

    def call(self, method, params=None, timeout=120):
        return self.b.call(method, params, self.s, timeout)

    def drain(self):
        while True:
            try:
                e = self.b.events.get_nowait()
            except queue.Empty:
                return
            if e.get("sessionId") != self.s:
                continue
            m, p = e["method"], e.get("params", {})
            if m == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                self.problems.append(f"exception at line {d.get('lineNumber')}: " +
                                     str(d.get("exception", {}).get("description", d.get("text")))[:400])
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning", "assert"):
                self.problems.append("console " + p["type"] + ": " + json.dumps(p.get("args", []))[:400])
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") in ("error", "warning"):
                self.problems.append("log: " + p["entry"].get("text", "")[:400])
            elif m == "Network.requestWillBeSent":
                self.requests.append(p.get("request", {}).get("url", ""))

    def eval(self, expr, timeout=120):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True}, timeout)
        if "exceptionDetails" in r:
            raise RuntimeError(f"evaluating {expr[:80]}: {r['exceptionDetails'].get('text')} "
                               f"{json.dumps(r['exceptionDetails'].get('exception', {}))[:300]}")
        return r["result"].get("value")

    def open(self, path, timeout=120):
        self.call("Page.navigate", {"url": "file://" + os.path.abspath(path)})
        end = time.time() + timeout
        while time.time() < end:
            v = self.eval("window.kdflowView && window.kdflowView.paintedMs || null")
            if v:
                return v
            self.drain()
            if self.problems:  # the script failed: say why now, not after the timeout
                raise RuntimeError(f"{path}: " + "; ".join(self.problems))
            time.sleep(0.05)
        raise RuntimeError(f"{path}: the graph was not painted within {timeout} s")

    def close(self):
        self.b.call("Target.closeTarget", {"targetId": self.target})

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()[-800:]}")
    return r.stdout


def explain_buffers(kdflow, src, kernel):
    """(buffer name, access) of each buffer argument, as `kdflow explain SRC k<ID>` prints them."""
    text = run([kdflow, "explain", src, f"k{kernel}", "--color", "never", "-q"])
    out, access = [], None
    for line in text.splitlines():
        m = re.match(r"\s+#\d+ .*\s(read|write|readwrite|unknown)$", line)
        if m:
            access = m.group(1)
            continue
        m = re.match(r"\s+buffer \d+ (\S+)\s", line)
        if m and access:
            out.append((m.group(1), access))
            access = None
    return text, out


def check_measured(page):
    """With --profile: colour by fraction of the roofline bound gives every measured kernel a colour."""
    page.eval("(() => { const s = document.getElementById('color-by'); s.value = 'roofline'; "
              "s.dispatchEvent(new Event('change')); })()")
    fills = page.eval("Array.from(document.querySelectorAll('.kernel rect')).map(r => r.style.fill)")
    measured = page.eval("JSON.parse(document.getElementById('kdflow-data').textContent).kernels"
                         ".map(k => k.roofline !== undefined)")
    return [f"k{i}: measured but not coloured ({f})" for i, (f, m) in enumerate(zip(fills, measured))
            if m and (not f or f in ("rgb(238, 238, 238)", "#eeeeee"))] + \
        ([] if any(measured) else ["no kernel has a measured time"])


def check_page(browser, kdflow, name, src, flow_json, html, shots, fold_box=None, select=None):
    flow = json.load(open(flow_json))
    page = Page(browser)
    painted = page.open(html)
    phases = page.eval("JSON.stringify(window.kdflowView)")
    fcp = page.eval("(performance.getEntriesByName('first-contentful-paint')[0]||{}).startTime||null")
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)

    n_launch = len(flow["kernels"])
    check(page.eval("document.querySelectorAll('.kernel').length") == n_launch,
          f"kernel elements != {n_launch} launches")
    check(page.eval("document.querySelectorAll('.call').length") == len(flow.get("library_calls", [])),
          "library call elements != library calls")
    if shots:
        page.screenshot(os.path.join(shots, f"{name}.png"))

    if n_launch:
        k = select if select is not None else n_launch // 2
        kname = flow["kernels"][k]["name"]
        page.eval(f"document.querySelector('.kernel[data-k=\"{k}\"] rect').dispatchEvent("
                  "new MouseEvent('click', {bubbles: true}))")
        panel = page.eval("document.getElementById('panel').innerText")
        rows = page.eval("Array.from(document.querySelectorAll('#panel tr.arg-buffer')).map(r => "
                         "[r.cells[2].querySelector('a').textContent, r.querySelector('.access').textContent])")
        text, expected = explain_buffers(kdflow, src, k)
        check(kname in panel, f"selecting k{k}: the panel does not name {kname}")
        check(bool(expected), f"explain k{k}: no buffer arguments parsed from:\n{text}")
        check([tuple(r) for r in rows] == expected,
              f"selecting k{k}: panel arguments {rows} != explain's {expected}")
        grid = "×".join(str(x) for x in flow["kernels"][k]["grid"])
        check(grid in panel, f"selecting k{k}: grid {grid} not shown")
        if shots:
            page.eval("document.getElementById('zoom-sel').click()")
            page.screenshot(os.path.join(shots, f"{name}-selected.png"))

        # Search by name: the first match is selected.
        target = flow["kernels"][-1]["name"]
        search_ms = page.eval("(() => { const t = performance.now(); const s = document.getElementById('search'); "
                              "s.value = " + json.dumps(target) + "; s.dispatchEvent(new Event('input')); "
                              "s.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter'})); "
                              "document.getElementById('graph').getBoundingClientRect(); "
                              "document.querySelector('.kernel').getBBox(); return performance.now() - t; })()")
        check(page.eval("document.querySelector('#panel h2').textContent") == target,
              f"search {target}: not selected")
        check((page.eval("parseInt(document.getElementById('search-count').textContent)") or 0) >= 1,
              f"search {target}: no match counted")

        # Folding a node hides its kernels.
        # The searched kernel's node: on screen and zoomed in, so its rows are drawn before the fold.
        box = page.eval(f"+document.querySelector('.kernel[data-k=\"{n_launch - 1}\"]').closest('.box').dataset.b")
        shown = page.eval(f"Array.from(document.querySelectorAll('.box[data-b=\"{box}\"] .kernel')).every(e => "
                          "getComputedStyle(e).display !== 'none')")
        check(shown, f"box {box}: its kernels are not shown before folding")
        page.eval(f"document.querySelector('.box[data-b=\"{box}\"] .fold').dispatchEvent(new MouseEvent('click', {{bubbles: true}}))")
        hidden = page.eval(f"Array.from(document.querySelectorAll('.box[data-b=\"{box}\"] .kernel')).every(e => "
                           "getComputedStyle(e).display === 'none')")
        check(hidden, f"folding box {box}: its kernels are still shown")
        fold_ms = page.eval("(() => { const t = performance.now(); document.getElementById('fold-all').click(); "
                            "getComputedStyle(document.querySelector('.kernel')).display; "
                            "document.querySelector('.box').getBBox(); return performance.now() - t; })()")
        # Nothing of a kernel is drawn (boxes off screen are not drawn at all), and every node is folded.
        check(page.eval("Array.from(document.querySelectorAll('.kernel')).every(e => e.getBoundingClientRect().width === 0)"),
              "fold all: kernels still shown")
        check(page.eval("Array.from(document.querySelectorAll('.box:not(.terminal)')).every(e => "
                        "window.kdflowView.folded(+e.dataset.b))"), "fold all: a node is not folded")
        if shots and name == "resnet18_tuned":
            page.eval("document.getElementById('fit').click()")
            page.screenshot(os.path.join(shots, f"{name}-folded.png"))
        page.eval("document.getElementById('unfold-all').click()")
        check(page.eval("document.querySelectorAll('.box.folded').length") == 0 and
              page.eval("Array.from(document.querySelectorAll('.box:not(.terminal)')).every(e => "
                        "!window.kdflowView.folded(+e.dataset.b))"), "unfold all")
        # Dependencies of the last kernel: the closure is highlighted.
        page.eval(f"document.querySelector('.kernel[data-k=\"{n_launch - 1}\"] rect').dispatchEvent(new MouseEvent('click', {{bubbles: true}}))")
        page.eval("document.getElementById('deps-up').click()")
        check(page.eval("document.getElementById('graph').classList.contains('dim')"), "depends-on: nothing highlighted")

    if name.endswith("+profile"):
        failures.extend(check_measured(page))
        if shots:
            page.eval("document.getElementById('fit').click()")
            page.screenshot(os.path.join(shots, f"{name}.png"))
    time.sleep(0.2)
    page.drain()
    check(not page.problems, "console: " + "; ".join(page.problems))
    bad = [u for u in page.requests if not u.startswith("file://") and not u.startswith("data:")
           and u != "about:blank"]
    check(not bad, f"network requests: {bad}")
    check(len([u for u in page.requests if u.startswith("file://")]) <= 1, f"requests: {page.requests}")
    page.close()
    size = os.path.getsize(html)
    extra = {"search_ms": round(search_ms, 1), "fold_all_ms": round(fold_ms, 1)} if n_launch else {}
    return failures, {**extra, "sample": name, "launches": n_launch, "page_bytes": size,
                      "graph_painted_ms": round(painted, 1), "phases": json.loads(phases), "first_contentful_paint_ms": fcp and round(fcp, 1)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kdflow")
    ap.add_argument("--sample", action="append", default=[])
    ap.add_argument("--synthetic", type=int, default=0)
    ap.add_argument("--profile", nargs=2, metavar=("SAMPLE", "CSV"),
                    help="also a page of SAMPLE with --profile CSV, coloured by fraction of the roofline bound")
    ap.add_argument("--screenshots")
    ap.add_argument("--times")
    ap.add_argument("--chromium", default=os.environ.get("KDFLOW_CHROMIUM", ""))
    a = ap.parse_args()
    exe = a.chromium or shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        print("check_view: SKIP: no chromium (Debian: apt-get install chromium; scripts/install-deps.sh does)")
        return 77
    kdflow = os.path.abspath(a.kdflow)
    tmp = tempfile.mkdtemp(prefix="kdflow-view-")
    if a.screenshots:
        os.makedirs(a.screenshots, exist_ok=True)
    cases = []
    for s in a.sample:
        cases.append((os.path.basename(s.rstrip("/")), s, [], []))
    if a.profile:
        cases.append((os.path.basename(a.profile[0].rstrip("/")) + "+profile", a.profile[0], [],
                      ["--profile", os.path.abspath(a.profile[1])]))
    if a.synthetic:
        syn = os.path.join(tmp, f"synthetic_{a.synthetic}x")
        run([sys.executable, os.path.join(ROOT, "bench", "make_synthetic.py"),
             os.path.join(ROOT, "samples", "resnet18_tuned"), syn, str(a.synthetic)])
        cases.append((os.path.basename(syn), syn, ["--no-params", "--no-relay"], []))
    browser = Browser(exe)
    status, times = 0, []
    try:
        for name, src, extra, view_args in cases:
            flow = os.path.join(tmp, name.split("+")[0] + ".json")
            t0 = time.time()
            run([kdflow, "extract", src, "-q", "-o", flow] + extra)
            t1 = time.time()
            html = os.path.join(tmp, name.replace("+", "_") + ".html")
            run([kdflow, "view", flow, "-q", "-o", html] + view_args)
            t2 = time.time()
            # The page from the flow must equal the page from the build (same input, same bytes).
            failures, t = check_page(browser, kdflow, name, flow, flow, html, a.screenshots)
            t["view_s"] = round(t2 - t1, 2)
            times.append(t)
            if failures:
                status = 1
                for f in failures:
                    print(f"check_view: {name}: FAIL: {f}")
            else:
                print(f"check_view: {name}: ok ({t['launches']} launches, page {t['page_bytes']} bytes, graph painted "
                      f"at {t['graph_painted_ms']} ms, kdflow view {t['view_s']} s)")
    finally:
        browser.close()
        shutil.rmtree(tmp, ignore_errors=True)
    if a.times:
        with open(a.times, "w") as f:
            json.dump(times, f, indent=1)
            f.write("\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
