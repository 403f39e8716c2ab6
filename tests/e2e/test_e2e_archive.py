"""End to end in headless Chromium: a paid release is never lost — reload, leave the page mid-release, restart."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from dpsynth.accounting import Ledger
from dpsynth.archive import Archive
from tests.e2e.server import CHROMIUM, browser_page, dashboard, goto_page, wait_idle

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed (./test installs it)"),
]


def _download(page, name: str) -> bytes:  # noqa: ANN001 - playwright Page
    with page.expect_download() as info:
        page.get_by_role("button", name=name).first.click()
    return Path(info.value.path()).read_bytes()


def _archived_zip(page) -> bytes:  # noqa: ANN001
    """On the Releases page after a reload (nothing loaded): open the newest release, download its zip."""
    goto_page(page, "Releases")
    page.locator('[data-testid="stExpander"] summary').first.click()  # the newest release is listed first
    wait_idle(page)
    return _download(page, "Download the release (.zip)")


def _load_sample_and_release(page) -> None:  # noqa: ANN001
    """Load the sample, wait until the Data page says it is loaded (a fresh session can go idle before
    the load has taken effect), then press the release button on the Release page."""
    page.get_by_role("button", name="Load the sample dataset").click()
    wait_idle(page)
    page.get_by_text(re.compile(r"Loaded .* columns")).first.wait_for(timeout=60_000)
    goto_page(page, "4 · Release")
    page.get_by_role("button", name="Release with ε = 1").click(timeout=60_000)


def test_release_survives_reload_leaving_the_page_and_a_restart(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite"
    with dashboard(ledger) as url, browser_page() as page:
        page.goto(url)
        wait_idle(page)
        _load_sample_and_release(page)
        wait_idle(page, timeout=180_000)
        page.get_by_text("Released").first.wait_for(timeout=180_000)
        first = _download(page, "everything (.zip)")

        page.reload()  # a new browser session: nothing in memory
        wait_idle(page)
        assert _archived_zip(page) == first

        # leave the page right after pressing the button: the release still completes on the server
        page.goto(url)
        wait_idle(page)
        _load_sample_and_release(page)
        # leave as soon as the second spend is recorded: the release is then under way on the server
        for _ in range(1200):
            if len(Ledger(ledger, create=False).spends()) == 2:
                break
            page.wait_for_timeout(100)
        assert len(Ledger(ledger, create=False).spends()) == 2, page.inner_text("body")[:3000]
        goto_page(page, "1 · Data")
        archive = Archive.for_ledger(Ledger(ledger, create=False))
        for _ in range(300):
            if [e.status for e in archive.list(recover=False)] == ["complete", "complete"]:
                break
            page.wait_for_timeout(500)
        assert [e.status for e in archive.list()] == ["complete", "complete"]

    # a server restart: the archive is on disk, the same zip comes back
    with dashboard(ledger) as url, browser_page() as page:
        page.goto(url)
        wait_idle(page)
        goto_page(page, "Releases")
        page.locator('[data-testid="stExpander"] summary').last.click()  # the oldest (the first release) is last
        wait_idle(page)
        assert _download(page, "Download the release (.zip)") == first
    assert len(Ledger(ledger, create=False).spends()) == 2
