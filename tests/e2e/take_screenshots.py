"""Take a screenshot of every dashboard page (sample data, one demo release) into docs/screenshots/.

Usage: python -m tests.e2e.take_screenshots
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from tests.e2e.server import ROOT, browser_page, dashboard, goto_page, wait_idle

OUT = ROOT / "docs" / "screenshots"
PAGES = [("2 · Schema", "2_schema"), ("3 · Privacy", "3_privacy"), ("4 · Release", "4_release")]
AFTER = [("Utility", "5_utility"), ("Trade-off explorer", "6_tradeoff"), ("Re-identification risk", "7_risk"),
         ("How the noise works", "8_mechanisms"), ("Privacy ledger", "9_ledger")]


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, dashboard(Path(tmp) / "ledger.sqlite") as url, browser_page(height=2400) as page:
        page.goto(url)
        wait_idle(page)
        page.screenshot(path=str(OUT / "0_start.png"), full_page=True)
        page.get_by_role("button", name="Load the sample dataset").click()
        wait_idle(page)
        page.screenshot(path=str(OUT / "1_data.png"), full_page=True)
        for title, name in PAGES:
            goto_page(page, title)
            page.screenshot(path=str(OUT / f"{name}.png"), full_page=True)
        page.get_by_role("button", name="Release with").click()
        wait_idle(page, timeout=180_000)
        page.screenshot(path=str(OUT / "4_release_done.png"), full_page=True)
        for title, name in AFTER:
            goto_page(page, title)
            if name == "6_tradeoff":
                for button in page.get_by_role("button", name="Run the simulation").all():
                    button.click()
                    wait_idle(page, timeout=180_000)
            page.wait_for_timeout(1500)  # plotly draws after the script ends
            page.screenshot(path=str(OUT / f"{name}.png"), full_page=True)
    print(f"screenshots in {OUT}")


if __name__ == "__main__":
    main()
