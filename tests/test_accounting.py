"""Budgets and the ledger's basic contract (fault and concurrency tests live in test_ledger_faults)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpsynth.accounting import Ledger, PrivacyBudget, advanced_composition
from dpsynth.errors import BudgetExceededError, InputError, LedgerError


def test_budget_arithmetic():
    a, b = PrivacyBudget(1.0, 1e-6), PrivacyBudget(0.5)
    assert (a + b) == PrivacyBudget(1.5, 1e-6)
    assert (a - b) == PrivacyBudget(0.5, 1e-6)
    assert (a / 2) == PrivacyBudget(0.5, 5e-7)
    with pytest.raises(InputError):
        PrivacyBudget(-1)


@given(st.lists(st.sampled_from([0.1, 0.2, 0.3, 0.05]), min_size=1, max_size=30))
def test_sum_of_spends_fits_exactly(spends):
    total = PrivacyBudget(sum(spends))
    acc = PrivacyBudget(0)
    for s in spends:
        acc = acc + PrivacyBudget(s)
    assert total.covers(acc)


def test_advanced_composition_formula():
    b = advanced_composition(0.01, 0.0, 1000, 1e-6)
    expected = math.sqrt(2 * 1000 * math.log(1e6)) * 0.01 + 1000 * 0.01 * math.expm1(0.01)
    assert b.epsilon == pytest.approx(expected)
    assert b.delta == pytest.approx(1e-6)
    # for few, large ε basic composition is better and is returned
    assert advanced_composition(1.0, 0.0, 2, 1e-6).epsilon == 2.0


def test_ledger_enforces_budget_and_persists(tmp_path):
    path = tmp_path / "l.sqlite"
    led = Ledger(path)
    assert led.created
    led.register("ds", PrivacyBudget(1.0))
    led.charge("ds", PrivacyBudget(0.6), mechanism="m", purpose="p")
    with pytest.raises(BudgetExceededError, match="Requested: ε = 0.5") as exc:
        led.charge("ds", PrivacyBudget(0.5), mechanism="m", purpose="p")
    assert "Remaining: ε = 0.4" in str(exc.value)
    again = Ledger(path, create=False)
    assert not again.created
    assert again.spent("ds").epsilon == pytest.approx(0.6)
    assert len(again.spends("ds")) == 1
    again.register("ds", PrivacyBudget(100.0))  # an existing budget is not raised by re-registering
    assert again.total("ds") == PrivacyBudget(1.0)


def test_missing_and_corrupt_ledger_are_reported(tmp_path):
    with pytest.raises(LedgerError, match="does not exist"):
        Ledger(tmp_path / "none.sqlite", create=False)
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(LedgerError):
        Ledger(bad)
    assert bad.read_bytes().startswith(b"this is not a database")
