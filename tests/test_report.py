"""Quality reports: the private one is marked and holds the real-data comparisons; the publishable one has none."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from plotly.offline import get_plotlyjs

from dpsynth import plots
from dpsynth.accounting import Ledger
from dpsynth.release import release
from dpsynth.report import PRIVATE_MARKER, private_report, public_summary, verdict
from dpsynth.schema import CategoricalColumn, NumericColumn, Schema
from dpsynth.utility import fidelity, value_comparisons


def made(tmp_path: Path):  # noqa: ANN201 - (real table, Release)
    rng = np.random.default_rng(5)
    n = 600
    # the real median of 'age' is 33.5 (the middle two values are 33 and 34): a real-data-only number
    age = np.concatenate([np.full(n // 2, 33), np.full(n // 2, 34)])
    age[: n // 4] = rng.integers(18, 33, n // 4)
    age[-n // 4:] = rng.integers(34, 80, n // 4)
    real = pd.DataFrame({"age": age, "colour": rng.choice(["red", "green"], n)})
    schema = Schema((NumericColumn(name="age", lower=0, upper=100, bins=5, integer=True),
                     CategoricalColumn(name="colour", categories=("red", "green"))))
    rel = release(real, schema, epsilon=1.0, seed=3, ledger=Ledger(tmp_path / "l.sqlite"), dataset_id="d")
    return real, rel


def test_private_report_is_marked_and_compares(tmp_path: Path) -> None:
    real, rel = made(tmp_path)
    html = private_report(rel, real)
    assert get_plotlyjs() in html
    html = html.replace(get_plotlyjs(), "")
    assert html.startswith("<!DOCTYPE html>")
    assert PRIVATE_MARKER.upper() in html[:300]  # at the very top of the file
    assert f"<div class='banner private'>{PRIVATE_MARKER.upper()}</div><h1>" in html  # and of the page
    assert "Verdict:" in html and plots.REAL in html
    assert "33.5" in html  # the real median is shown
    assert "<script src=" not in html  # plotly.js inline (above), nothing fetched from the web: opens offline


def test_public_summary_has_no_real_data(tmp_path: Path) -> None:
    real, rel = made(tmp_path)
    html = public_summary(rel).replace(get_plotlyjs(), "")  # the library's own code holds arbitrary digits
    assert PRIVATE_MARKER.upper() not in html and PRIVATE_MARKER not in html
    assert plots.REAL not in html
    assert "33.5" not in html
    assert "released noisy counts" in html and "Release card" in html


def test_verdict_names_distorted_values() -> None:
    schema = Schema((NumericColumn(name="gain", lower=0, upper=10_000, bins=2, integer=True),))
    real = pd.DataFrame({"gain": [0] * 90 + [6000] * 10})
    synthetic = pd.DataFrame({"gain": np.linspace(1, 4999, 90).round().tolist() + [6000] * 10})
    level, reasons = verdict(fidelity(real, synthetic, schema), value_comparisons(real, synthetic, schema))
    assert level == "usable with care"  # the binned shares agree exactly, the values do not
    assert any("gain are distorted" in r and "90.0% of real rows" in r for r in reasons)
