"""The documentation site's layout (`make docs-check`, and `make test` after its site build): every
page of site/ is loaded by headless Chromium at 1280 x 900 and at 390 x 844, and fails when a
table, a code block or an image is wider than the page's content column, when a code block wraps
its lines (program output wraps, hanging), when Getting started's code does not show whole, when a table cell is narrower than a word of its own, when a plot's text is shown
smaller than 11 pixels, and when a table that scrolls on a phone hides its first column or gives
no cue that it scrolls. And the site works from disk: site/index.html opened as a file reaches
every page in two clicks, and its search finds a page.

- At both widths, every table (with the box Material wraps it in), code block and image lies
  within the content column, and the page does not scroll sideways. A box that hides what
  overflows it (`overflow: hidden`) must not overflow: that is clipping.
- At 390 pixels a wide table or code block may scroll inside its own box (`overflow-x: auto`):
  it still fits. A table that does keeps its first column in view (sticky) and its box shows a
  cue at the edge (a gradient background). At 1280 pixels no table may need to scroll, so
  nothing is cut off at the side of a desktop window; a code block may (its lines are never
  wrapped: `white-space: pre`); an image shown at less than 4/5 of its file's width links to
  that file, where it can be read at full size.
- Program output is not code: a block marked as output (```` ```console {.output} ````, the
  class `output`) wraps its long lines (`white-space: pre-wrap`) at every width, so a result
  line is read whole, and each wrapped line hangs (a negative text-indent on its line's span),
  so where each line starts stays plain. Code keeps its lines as written (YAML and Python keep
  their indent): only output may wrap.
- The page a newcomer reads first (CODE_FITS: Getting started) shows every code block whole at
  both widths: none scrolls sideways (lines short enough, long commands broken with `\`, output
  wrapped).
- A word of a table cell (text between spaces) is never broken across lines: a cell narrower
  than its longest word is a problem (measured with a Range over each word).
- At 1280 pixels a plot's smallest text, recorded in its PNG by benchmarks/plots.py (a tEXt
  chunk, `logstore:min-text-px`, in the file's pixels), scaled by the width the image is shown
  at, is at least 11 pixels. A plot that does not record it fails.

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
# pages whose code blocks show whole at both widths, none scrolling sideways: the newcomer's
CODE_FITS = {"getting-started.html"}
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

# Returns a list of problems, each a sentence. arguments[0]: strict (the desktop width);
# arguments[1]: every code block must show whole (CODE_FITS).
MEASURE = r"""
const strict = arguments[0], codeFits = arguments[1], tol = 1;
const column = document.querySelector('.md-content');
if (!column) return {problems: ['no content column (.md-content) on the page'], images: []};
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
    else if (scrolls && strict && el.tagName !== 'PRE')  // a code block's long line scrolls
      problems.push(`${name(el)}: must scroll ${px(over)} sideways in its ${px(a.clientWidth)} box`);
  }
  if (strict && el.tagName === 'IMG' && el.naturalWidth > 1.25 * rect.width) {
    const link = el.closest('a[href]');
    if (!link || link.href !== el.src)
      problems.push(`${name(el)}: shown at ${px(rect.width)} of its ${px(el.naturalWidth)}, without a link to the full-size file`);
  }
  if (el.tagName === 'PRE') {
    const code = el.querySelector(':scope > code') || el;
    const space = getComputedStyle(code).whiteSpace;
    if (el.closest('.output')) {  // program output: its lines wrap, and hang
      if (space !== 'pre-wrap')
        problems.push(`${name(el)}: output whose lines do not wrap (white-space ${space})`);
      const line = code.querySelector(':scope > span[id^="__span"]');
      if (line && !(parseFloat(getComputedStyle(line).textIndent) < 0))
        problems.push(`${name(el)}: output whose wrapped lines do not hang (no negative text-indent)`);
    } else if (space !== 'pre') {
      problems.push(`${name(el)}: its lines wrap (white-space ${space}), they must scroll`);
    }
    if (codeFits && code.scrollWidth - code.clientWidth > tol)
      problems.push(`${name(el)}: scrolls ${px(code.scrollWidth - code.clientWidth)} sideways, on a page whose code shows whole (CODE_FITS)`);
  }
  if (el.tagName === 'TABLE' && !strict) {
    const wrap = el.closest('.md-typeset__scrollwrap');
    if (wrap && wrap.scrollWidth - wrap.clientWidth > tol) {
      const first = el.querySelector('tr > :first-child');
      if (first && getComputedStyle(first).position !== 'sticky')
        problems.push(`${name(el)}: scrolls sideways, and its first column scrolls out of view (not sticky)`);
      if (!getComputedStyle(wrap).backgroundImage.includes('gradient'))
        problems.push(`${name(el)}: scrolls sideways without a cue at its edge (no gradient on its box)`);
    }
  }
}
// table cells narrower than a word of their own: a word (between spaces) broken across lines
for (const cell of column.querySelectorAll('td, th')) {
  if (cell.getBoundingClientRect().width === 0) continue;
  const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  let broken = null;
  for (let node = walker.nextNode(); node && !broken; node = walker.nextNode()) {
    for (const m of node.data.matchAll(/[^\s-]+/g)) {  // a line may break after a hyphen
      if (m[0].length < 2) continue;
      const range = document.createRange();
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      const tops = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
      if (tops.size > 1) { broken = m[0]; break; }
    }
  }
  if (broken)
    problems.push(`${name(cell)}: narrower than its word "${broken.slice(0, 50)}" (${px(cell.getBoundingClientRect().width)} wide), which breaks across lines`);
}
const images = [...column.querySelectorAll('img')].map((img) =>
  [img.getAttribute('src'), img.getBoundingClientRect().width, img.naturalWidth]);
return {problems, images};
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

    def run_async(self, script: str, *args: Any) -> Any:
        """A script that ends by calling its last argument with the result."""
        self._call("/timeouts", body={"script": 30000})
        return self._call("/execute/async", body={"script": script, "args": list(args)})

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

# --- plots: the smallest text a PNG records (benchmarks/plots.py) ---------------------------------

MIN_TEXT_KEY = "logstore:min-text-px"
MIN_TEXT_PX = 11


def png_texts(data: bytes) -> Dict[str, str]:
    """The tEXt chunks of a PNG file."""
    texts, at = {}, 8
    while at < len(data):
        length, kind = int.from_bytes(data[at:at + 4], "big"), data[at + 4:at + 8]
        if kind == b"tEXt":
            key, _, value = data[at + 8:at + 8 + length].partition(b"\0")
            texts[key.decode("latin-1")] = value.decode("latin-1")
        at += 12 + length
    return texts


def plot_text_problems(page: str, images: List[List[Any]]) -> List[str]:
    """Each PNG of the page whose smallest text is shown smaller than MIN_TEXT_PX."""
    problems = []
    for src, shown, natural in images:
        if not src.endswith(".png") or not natural:
            continue
        path = (SITE / page).parent / src
        recorded = png_texts(path.read_bytes()).get(MIN_TEXT_KEY)
        if recorded is None:
            problems.append(f"img {src}: records no {MIN_TEXT_KEY} (draw it with benchmarks/plots.py)")
        elif float(recorded) * shown / natural < MIN_TEXT_PX - 0.05:
            problems.append(f"img {src}: its smallest text is {float(recorded) * shown / natural:.1f} px "
                            f"({recorded} px of the file shown at {shown:.0f} of {natural} px), under {MIN_TEXT_PX}")
    return problems


def measure(browser: "Browser", page: str, strict: bool) -> List[str]:
    result = browser.run(MEASURE, strict, (page or "index.html") in CODE_FITS)
    problems = list(result["problems"])
    if strict:
        problems += plot_text_problems(page or "index.html", result["images"])
    return problems


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
    problems = measure(browser, page, strict)
    assert not problems, f"site/{page} at {width} px:\n  " + "\n  ".join(problems)


# --- from disk: no server --------------------------------------------------------------------

LINKS = r"""
return [...document.querySelectorAll('a[href]')].map((a) => a.href)
  .filter((h) => h.startsWith('file:')).map((h) => h.split('#')[0]);
"""


def test_the_home_page_opened_from_disk_reaches_every_page_in_two_clicks(browser: Browser) -> None:
    pages = {(SITE / p).resolve().as_uri() for p in site_pages() if p and p != "404.html"}
    home = (SITE / "index.html").resolve().as_uri()
    browser.viewport(1280, 900)
    browser.open(home)
    first = set(browser.run(LINKS))
    not_files = sorted(url for url in first if not Path(urllib.request.url2pathname(url[len("file://"):])).is_file())
    assert not not_files, f"links of {home} to no file (a directory listing from disk): {not_files}"
    reached = set(first)
    for url in sorted(first & pages):  # the second click, only where the first did not reach all
        if pages <= reached:
            break
        browser.open(url)
        assert browser.run("return !!document.querySelector('.md-content')"), f"{url}: not a page of the site"
        reached |= set(browser.run(LINKS))
    missing = sorted(pages - reached)
    assert not missing, f"not reached from {home} in two clicks: {missing}"


SEARCH = r"""
const done = arguments[arguments.length - 1];
const input = document.querySelector('.md-search__input');
if (!input) return done('no search box');
input.focus();
input.value = arguments[0];
input.dispatchEvent(new Event('input', {bubbles: true}));
input.dispatchEvent(new KeyboardEvent('keyup', {bubbles: true, key: 'e'}));
const started = Date.now();
(function wait() {
  const found = [...document.querySelectorAll('.md-search-result__item a')].map((a) => a.href);
  if (found.length) return done(found);
  if (Date.now() - started > 15000)
    return done('no result after 15 s: ' + (document.querySelector('.md-search-result__meta') || {}).textContent);
  setTimeout(wait, 100);
})();
"""


def test_the_search_works_from_disk(browser: Browser) -> None:
    browser.viewport(1280, 900)
    browser.open((SITE / "index.html").resolve().as_uri())
    found = browser.run_async(SEARCH, "Troubleshooting")
    assert isinstance(found, list), f"search from file:// failed: {found}"
    assert any("troubleshooting.html" in url for url in found), found


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Screenshots of pages of the built site.")
    parser.add_argument("--screenshots", type=Path, required=True, metavar="DIR")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("pages", nargs="*", help="page paths under site/, e.g. configuration")
    args = parser.parse_args(argv)
    args.screenshots.mkdir(parents=True, exist_ok=True)
    with serve(SITE) as url, chromium() as b:
        for page in args.pages or site_pages():
            page = page + ".html" if page and not page.endswith(".html") else page
            b.viewport(args.width, 900)
            b.open(url + page)
            problems = measure(b, page, args.width >= 1280)
            out = args.screenshots / f"{(page[:-len('.html')] or 'index').replace('/', '-')}-{args.width}.png"
            b.screenshot(out, args.width)
            print(out, "ok" if not problems else "\n  ".join(["problems:"] + problems))
    return 0


if __name__ == "__main__":
    sys.exit(main())
