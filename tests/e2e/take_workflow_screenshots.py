"""Screenshots of the curator's workflow states into docs/screenshots/: a release, the same release after
the settings changed, the Utility page's raw-value comparison and reports, the risk page at the release's ε,
the Release page with the budget used up, a failed upload after a good one, and a new upload's Release page.

Usage: python -m tests.e2e.take_workflow_screenshots
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from tests.e2e.server import ROOT, browser_page, dashboard, goto_page, wait_idle

OUT = ROOT / "docs" / "screenshots"


def set_epsilon(page, value: float) -> None:  # noqa: ANN001 - playwright Page
    goto_page(page, "3 · Privacy")
    box = page.get_by_role("spinbutton", name="ε for this release")
    box.fill(f"{value:g}")
    box.press("Enter")
    wait_idle(page)


def release(page) -> None:  # noqa: ANN001
    goto_page(page, "4 · Release")
    page.get_by_role("button", name="Release with").click()
    wait_idle(page, timeout=180_000)


def shot(page, name: str, height: int = 1700) -> None:  # noqa: ANN001
    # the app scrolls inside its own container, so a long page needs a tall window to be seen whole
    page.set_viewport_size({"width": 1400, "height": height})
    page.wait_for_timeout(1500)  # plotly draws after the script ends
    page.screenshot(path=str(OUT / f"{name}.png"), full_page=True)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, dashboard(Path(tmp) / "ledger.sqlite") as url, \
            browser_page(height=1700) as page:
        page.goto(url)
        wait_idle(page)
        page.get_by_role("button", name="Load the sample dataset").click()
        wait_idle(page)
        goto_page(page, "4 · Release")
        shot(page, "4_release")
        release(page)
        shot(page, "4_release_done")
        goto_page(page, "Utility")
        page.get_by_role("button", name="Prepare the two reports").click()
        wait_idle(page, timeout=120_000)
        shot(page, "5_utility", 6200)
        goto_page(page, "Re-identification risk")
        shot(page, "7_risk")
        set_epsilon(page, 2)
        goto_page(page, "4 · Release")
        shot(page, "4_release_stale", 1000)
        goto_page(page, "How the noise works")
        shot(page, "8_mechanisms")
        # spend the rest of the default budget of 4: 1 + 3, then the button is disabled with the reason
        goto_page(page, "4 · Release")
        page.get_by_role("button", name="Start a new release").click()
        wait_idle(page)
        set_epsilon(page, 3)
        release(page)
        page.get_by_role("button", name="Start a new release").click()
        wait_idle(page)
        set_epsilon(page, 1)
        goto_page(page, "4 · Release")
        shot(page, "4_release_budget_used", 1200)
        goto_page(page, "1 · Data")
        bad = Path(tmp) / "broken.csv"
        bad.write_text("id,age,ward\n1,34,north\n2,51\n3,47,south,extra\n")
        page.locator('[data-testid="stFileUploaderDropzoneInput"]').first.set_input_files(str(bad))
        wait_idle(page)
        shot(page, "1_data_bad_upload", 1100)
        import numpy as np
        import pandas as pd

        rng = np.random.default_rng(0)
        good = Path(tmp) / "patients.csv"
        pd.DataFrame({"age": rng.integers(18, 95, 2000), "ward": rng.choice(["north", "south", "east"], 2000),
                      "stay_days": rng.integers(1, 30, 2000)}).to_csv(good, index=False)
        page.locator('[data-testid="stFileUploaderDropzoneInput"]').first.set_input_files(str(good))
        wait_idle(page)
        goto_page(page, "4 · Release")
        shot(page, "4_release_uploaded", 1200)
    print(f"screenshots in {OUT}")


if __name__ == "__main__":
    main()
