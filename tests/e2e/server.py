"""Start the dashboard with ``streamlit run`` on a free port, and drive it with Playwright + Debian Chromium."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def dashboard(ledger: Path, timeout: float = 60.0, env: dict[str, str] | None = None,
              log: Path | None = None) -> Iterator[str]:
    """Run ``streamlit run app.py`` headless with its own ledger; yield the base URL; stop it afterwards.

    ``env`` adds variables (e.g. a sandboxed TMPDIR/HOME); ``log`` receives the server's output.
    """
    port = free_port()
    full_env = {**os.environ, "DPSYNTH_LEDGER": str(ledger), "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false", **(env or {})}
    cmd = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port", str(port),
           "--server.address", "127.0.0.1", "--server.fileWatcherType", "none"]
    if log is not None:
        with open(log, "ab") as out:
            proc = subprocess.Popen(cmd, cwd=ROOT, env=full_env, stdout=out, stderr=subprocess.STDOUT)
    else:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                if log is not None:
                    out_text = log.read_text(errors="replace")
                else:
                    out_text = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
                raise RuntimeError(f"streamlit did not start on {url}:\n{out_text}")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def browser_page(width: int = 1400, height: int = 1000) -> Iterator[object]:
    """A Playwright page in headless Debian Chromium (downloads allowed)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": width, "height": height}, accept_downloads=True)
            yield context.new_page()
        finally:
            browser.close()


def wait_idle(page, timeout: float = 60_000) -> None:  # noqa: ANN001 - playwright Page
    """Wait until the app has finished running its script (no 'running' indicator)."""
    idle = "() => document.querySelector('[data-testid=stApp]')?.dataset.testScriptState === 'notRunning'"
    page.wait_for_timeout(300)
    # a button that reruns the script is briefly 'notRunning' between the two runs: require a stable idle
    for _ in range(3):
        page.wait_for_function(idle, timeout=timeout)
        page.wait_for_timeout(400)
        if page.evaluate(idle):
            return


def goto_page(page, title: str) -> None:  # noqa: ANN001
    """Click a page in the sidebar navigation (keeps the session, unlike a new URL)."""
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text=title).first.click()
    wait_idle(page)
