"""Numbers written for people (dpsynth.humanize): no scientific notation, right plurals, big numbers in words."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpsynth import humanize as h


@pytest.mark.parametrize(("x", "text"), [
    (0, "0"), (1, "1"), (48_842, "48,842"), (1220.4, "1,220"), (2.5, "2.5"), (0.043, "0.043"),
    (10**17, "about 100 quadrillion"), (121_927_680_000_000, "about 120 trillion"), (1e-6, "10⁻⁶"),
    (2.5e-7, "2.5 × 10⁻⁷"),
])
def test_number(x: float, text: str) -> None:
    assert h.number(x) == text


def test_plurals_and_rounded_figures() -> None:
    assert h.count(1, "row") == "1 row"
    assert h.count(2, "row") == "2 rows"
    assert h.about(1220.4, "row") == "about 1,200 rows"
    assert h.about(1, "row") == "about 1 row"
    assert h.factor(math.exp(10)) == "22,000"
    assert h.percent(0.917) == "91.7%"


def test_domain_sizes_in_words() -> None:
    assert h.cells(48) == "48 cells"
    assert h.cells(10**17) == "about 100 quadrillion cells"
    huge = h.cells(10**174)
    assert huge == "about 10¹⁷⁴ cells (a 175-digit number)"


@given(st.floats(min_value=-1e300, max_value=1e300, allow_nan=False))
def test_never_scientific_notation(x: float) -> None:
    text = h.number(x)
    assert "e+" not in text and "e-" not in text


def test_budget_amounts_hide_float_sums() -> None:
    assert h.budget(0.1 + 0.2) == "0.3"
    assert h.budget(4 - 3.9999999999) == "0"
    assert h.budget(-1e-12) == "0"


def test_blank_missing_shows_an_empty_cell() -> None:
    import numpy as np
    import pandas as pd

    df = pd.DataFrame({"job": ["Sales", None, "Tech"], "age": [34.0, np.nan, 51.0]})
    shown = h.blank_missing(df)
    assert shown["job"].tolist() == ["Sales", "", "Tech"]
    assert shown["age"].tolist() == [34.0, "", 51.0]
    assert df["job"].isna().sum() == 1  # the frame itself is untouched


def test_likelihood_factor_past_the_float_range() -> None:
    """e^ε is a float up to ε ≈ 709; past it the factor is still said, as a power of ten."""
    assert h.likelihood_factor(1.0) == h.factor(math.e)
    assert h.likelihood_factor(1000.0) == "about 10⁴³⁴"
    assert h.likelihood_factor(1e300).startswith("about 10")
