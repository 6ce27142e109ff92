"""The documentation site's layout (`make docs-check`, and `make test` after its site build): every
page of site/ is loaded by headless Chromium at 1280 x 900 and at 390 x 844, and fails when a
table, a code block or an image is wider than the page's content column.

- At both widths, every table (with the box Material wraps it in), code block and image lies
  within the content column, and the page does not scroll sideways. A box that hides what
  overflows it (`overflow: hidden`) must not overflow: that is clipping.
- At 390 pixels a wide table or code block may scroll inside its own box (`overflow-x: auto`):
  it still fits. At 1280 pixels none may need to scroll, so nothing is cut off at the side of a
  desktop window; and an image shown at less than 4/5 of its file's width links to that file,
  where it can be read at full size.

Chromium is Debian's (`chromium` and `chromium-driver`: /usr/bin/chromium, /usr/bin/chromedriver;
`make docs-check` installs them when missing), driven through chromedriver's WebDriver HTTP API
with the standard library: no Python package is needed. The site is served from a local
http.server on 127.0.0.1; every other host resolves to nothing, so the pages render as offline
(in the fallback fonts, which are wider than Material's Roboto: the check errs on the safe side).

Screenshots of pages, as the test sees them (full page, PNG):
    python -m tests.docs.test_layout --screenshots /tmp getting-started configuration
"""
from __future__ import annotations

import argparse
import base64
import contextlib
import functools
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("LOGSTORE_DOCS_SITE", ROOT / "site"))  # the built site
CHROMIUM = os.environ.get("LOGSTORE_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("LOGSTORE_CHROMEDRIVER", "/usr/bin/chromedriver")
# (width, height, strict): at the desktop width nothing may need to scroll sideways
VIEWPORTS = {"1280": (1280, 900, True), "390": (390, 844, False)}
CHROMIUM_ARGS = [
    "--headless", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-extensions", "--disable-dev-shm-usage", "--hide-scrollbars",
    # no host but the local server: no font or script from the network, and no waiting for one
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]


def site_pages() -> List[str]:
    """Every page of the built site, as its path under site/ ("" for the home page)."""
    pages = sorted(p.relative_to(SITE).as_posix() for p in SITE.rglob("*.html"))
    return [p[: -len("index.html")] if p.endswith("index.html") else p for p in pages]


# --- the measurement, run in the page ----------------------------------------------------------

# Returns a list of problems, each a sentence. arguments[0]: strict (the desktop width).
MEASURE = r"""
const strict = arguments[0], tol = 1;
const column = document.querySelector('.md-content');
if (!column) return ['no content column (.md-content) on the page'];
const col = column.getBoundingClientRect();
const problems = [];
const name = (el) => {
  let text = el.tagName.toLowerCase();
  if (el.tagName === 'IMG') return text + ' ' + (el.getAttribute('src') || '');
  const words = (el.innerText || '').trim().replace(/\s+/g, ' ');
  return text + ' "' + words.slice(0, 70) + (words.length > 70 ? '...' : '') + '"';
};
const px = (n) => Math.round(n) + ' px';
const doc = document.scrollingElement;
if (doc.scrollWidth > window.innerWidth + tol)
  problems.push(`the page scrolls sideways: ${px(doc.scrollWidth)} wide in a ${px(window.innerWidth)} window`);
for (const el of column.querySelectorAll('table, pre, img')) {
  const rect = el.getBoundingClientRect();
  if (rect.width === 0 && rect.height === 0) continue;  // not displayed
  // the box the element shows in: Material wraps each table in a scrolling box
  const box = el.closest('.md-typeset__scrollwrap') || el;
  const b = box.getBoundingClientRect();
  if (b.left < col.left - tol || b.right > col.right + tol)
    problems.push(`${name(el)}: its box (${px(b.left)} to ${px(b.right)}) leaves the content column (${px(col.left)} to ${px(col.right)})`);
  // every box from the element's code (a code block's scrolling box) up to the column
  const boxes = [];
  for (const inner of el.querySelectorAll(':scope > code')) boxes.push(inner);
  for (let a = el; a && a !== column; a = a.parentElement) boxes.push(a);
  for (const a of boxes) {
    const over = a.scrollWidth - a.clientWidth;
    if (over <= tol || a.clientWidth === 0) continue;
    const overflow = getComputedStyle(a).overflowX;
    const scrolls = overflow === 'auto' || overflow === 'scroll';
    if (!scrolls && overflow !== 'visible')
      problems.push(`${name(el)}: ${px(over)} clipped by ${a.tagName.toLowerCase()} (overflow ${overflow})`);
    else if (scrolls && strict)
      problems.push(`${name(el)}: must scroll ${px(over)} sideways in its ${px(a.clientWidth)} box`);
  }
  if (strict && el.tagName === 'IMG' && el.naturalWidth > 1.25 * rect.width) {
    const link = el.closest('a[href]');
    if (!link || link.href !== el.src)
      problems.push(`${name(el)}: shown at ${px(rect.width)} of its ${px(el.naturalWidth)}, without a link to the full-size file`);
  }
}
return problems;
"""


# --- a local server and Chromium through chromedriver -----------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(directory: Path) -> Iterator[str]:
    """site/ over HTTP on 127.0.0.1 (Material's scripts need http:, not file:)."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class Browser:
    """One headless Chromium session through chromedriver's W3C WebDriver HTTP API."""

    def __init__(self, driver_url: str, session: str) -> None:
        self._base = f"{driver_url}/session/{session}"

    @staticmethod
    def call(url: str, method: str = "GET", body: Optional[Dict[str, Any]] = None,
             timeout: float = 60) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.loads(response.read() or b"{}").get("value")
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"chromedriver {method} {url}: {exc.read().decode(errors='replace')}") from None

    def _call(self, path: str, method: str = "POST", body: Optional[Dict[str, Any]] = None) -> Any:
        return self.call(self._base + path, method, {} if body is None and method == "POST" else body)

    def viewport(self, width: int, height: int) -> None:
        self._call("/goog/cdp/execute", body={"cmd": "Emulation.setDeviceMetricsOverride", "params": {
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}})

    def open(self, url: str) -> None:
        self._call("/url", body={"url": url})

    def run(self, script: str, *args: Any) -> Any:
        return self._call("/execute/sync", body={"script": script, "args": list(args)})

    def screenshot(self, path: Path, width: int) -> None:
        """The whole page at this width, as a PNG."""
        height = int(self.run("return Math.ceil(document.documentElement.scrollHeight)"))
        self.viewport(width, min(height, 16000))
        path.write_bytes(base64.b64decode(self._call("/screenshot", method="GET")))


@contextlib.contextmanager
def chromium() -> Iterator[Browser]:
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not Path(path).exists()]
    if missing:
        raise RuntimeError(f"{', '.join(missing)} missing: `make docs-check` installs Debian's "
                           f"chromium and chromium-driver")
    port = free_port()
    profile = tempfile.mkdtemp(prefix="logstore-chromium-")
    driver = subprocess.Popen([CHROMEDRIVER, f"--port={port}"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    driver_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if (Browser.call(driver_url + "/status", timeout=2) or {}).get("ready"):
                    break
            except (OSError, RuntimeError):
                pass
            if time.monotonic() > deadline or driver.poll() is not None:
                raise RuntimeError(f"{CHROMEDRIVER} did not start")
            time.sleep(0.1)
        args = CHROMIUM_ARGS + [f"--user-data-dir={profile}", "--window-size=1280,900"]
        if os.geteuid() == 0:
            args.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
        session = Browser.call(driver_url + "/session", "POST", {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args}}}}, timeout=120)["sessionId"]
        try:
            yield Browser(driver_url, session)
        finally:
            with contextlib.suppress(Exception):
                Browser.call(f"{driver_url}/session/{session}", "DELETE")
    finally:
        driver.terminate()
        try:
            driver.wait(10)
        except subprocess.TimeoutExpired:
            driver.kill()
        shutil.rmtree(profile, ignore_errors=True)


# --- the test ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def site_url() -> Iterator[str]:
    if not (SITE / "index.html").is_file():
        pytest.fail(f"{SITE} is not built: run `make docs` (or `make docs-check`)")
    with serve(SITE) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as b:
        yield b


PAGES = site_pages() if (SITE / "index.html").is_file() else ["(site not built)"]


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
@pytest.mark.parametrize("page", PAGES)
def test_nothing_is_wider_than_the_content_column(page: str, viewport: str, site_url: str,
                                                  browser: Browser) -> None:
    width, height, strict = VIEWPORTS[viewport]
    browser.viewport(width, height)
    browser.open(site_url + page)
    problems = browser.run(MEASURE, strict)
    assert not problems, f"site/{page} at {width} px:\n  " + "\n  ".join(problems)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Screenshots of pages of the built site.")
    parser.add_argument("--screenshots", type=Path, required=True, metavar="DIR")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("pages", nargs="*", help="page paths under site/, e.g. configuration")
    args = parser.parse_args(argv)
    args.screenshots.mkdir(parents=True, exist_ok=True)
    with serve(SITE) as url, chromium() as b:
        for page in args.pages or site_pages():
            page = page.strip("/") + "/" if page and not page.endswith(".html") else page
            b.viewport(args.width, 900)
            b.open(url + page)
            problems = b.run(MEASURE, args.width >= 1280)
            out = args.screenshots / f"{(page.strip('/') or 'index').replace('/', '-')}-{args.width}.png"
            b.screenshot(out, args.width)
            print(out, "ok" if not problems else "\n  ".join(["problems:"] + problems))
    return 0


if __name__ == "__main__":
    sys.exit(main())
