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
    with tempfile.TemporaryDirectory() as tmp, dashboard(Path(tmp) / "ledger.sqlite") as url:
        sample_flow(url)
        upload_flow(url, Path(tmp))
    print(f"screenshots in {OUT}")


def sample_flow(url: str) -> None:
    """Every page with the bundled sample and one release."""
    with browser_page(height=1700) as page:
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
            # the app scrolls inside its own container, so a long page needs a tall window to be seen whole
            page.set_viewport_size({"width": 1400, "height": 3400 if name == "5_utility" else 1700})
            page.wait_for_timeout(1500)  # plotly draws after the script ends
            page.screenshot(path=str(OUT / f"{name}.png"), full_page=True)
            if name == "8_mechanisms":
                for tab in ["Gaussian", "Randomized response", "Exponential mechanism"]:
                    page.get_by_role("tab", name=tab).click()
                    page.wait_for_timeout(1200)
                    slug = tab.lower().replace(" ", "_")
                    page.screenshot(path=str(OUT / f"{name}_{slug}.png"), full_page=True)


def upload_flow(url: str, tmp: Path) -> None:
    """A curator's own file: a malformed upload, then a good one with its drafted (flagged) schema."""
    import numpy as np
    import pandas as pd

    bad = tmp / "broken.csv"
    bad.write_text("id,age,ward\n1,34,north\n2,51\n3,47,south,extra\n")
    rng = np.random.default_rng(0)
    good = tmp / "patients.csv"
    pd.DataFrame({"age": rng.integers(18, 95, 2000), "ward": rng.choice(["north", "south", "east"], 2000),
                  "stay_days": rng.integers(1, 30, 2000)}).to_csv(good, index=False)
    with browser_page(height=1600) as page:
        page.goto(url)
        wait_idle(page)
        page.locator('[data-testid="stFileUploaderDropzoneInput"]').first.set_input_files(str(bad))
        wait_idle(page)
        page.screenshot(path=str(OUT / "1_data_bad_upload.png"), full_page=True)
        page.locator('[data-testid="stFileUploaderDropzoneInput"]').first.set_input_files(str(good))
        wait_idle(page)
        goto_page(page, "2 · Schema")
        page.screenshot(path=str(OUT / "2_schema_uploaded.png"), full_page=True)
        goto_page(page, "4 · Release")
        page.screenshot(path=str(OUT / "4_release_uploaded.png"), full_page=True)


if __name__ == "__main__":
    main()
