"""End to end in headless Chromium: upload a CSV, set bounds and ε, release (double-click), download the CSV."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpsynth.accounting import Ledger
from tests.e2e.server import CHROMIUM, browser_page, dashboard, goto_page, wait_idle

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed (./test installs it)"),
]

SCHEMA = {"columns": [
    {"name": "age", "type": "numeric", "lower": 20, "upper": 70, "bins": 5, "integer": True},
    {"name": "ward", "type": "categorical", "categories": ["north", "south", "east"]},
]}


def test_upload_release_download(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    n = 300
    data = pd.DataFrame({"age": rng.integers(0, 100, n), "ward": rng.choice(["north", "south", "east"], n),
                         "note": rng.choice(["x", "y"], n)})
    csv = tmp_path / "patients.csv"
    data.to_csv(csv, index=False)
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    ledger = tmp_path / "ledger.sqlite"

    with dashboard(ledger) as url, browser_page() as page:
        page.goto(url)
        wait_idle(page)
        page.locator('[data-testid="stFileUploaderDropzoneInput"]').first.set_input_files(str(csv))
        wait_idle(page)
        page.get_by_text("Loaded patients.csv").wait_for()

        goto_page(page, "2 · Schema")
        page.locator("[data-testid=stAlert]").filter(has_text="not private").first.wait_for()  # the draft is flagged
        page.locator('[data-testid="stFileUploaderDropzoneInput"]').first.set_input_files(str(schema))
        wait_idle(page)
        page.get_by_text("2 columns").first.wait_for()  # sidebar: the loaded schema

        goto_page(page, "3 · Privacy")
        eps = page.get_by_role("spinbutton", name="ε for this release")
        eps.fill("2")
        eps.press("Enter")
        wait_idle(page)

        goto_page(page, "4 · Release")
        button = page.get_by_role("button", name="Release with ε = 2")
        button.dblclick()
        wait_idle(page, timeout=120_000)
        page.get_by_text("Released:").wait_for()
        with page.expect_download() as info:
            page.get_by_role("button", name="synthetic.csv").click()
        body = Path(info.value.path()).read_bytes()

    spends = Ledger(ledger, create=False).spends()
    assert len(spends) == 1 and spends[0].epsilon == 2.0  # the double click spent once
    syn = pd.read_csv(io.BytesIO(body))
    assert list(syn.columns) == ["age", "ward"]
    assert len(syn) > 0
    assert syn["age"].between(20, 70).all() and (syn["age"] % 1 == 0).all()
    assert set(syn["ward"]) <= {"north", "south", "east"}
