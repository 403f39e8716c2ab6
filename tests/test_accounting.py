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
    # e^ε overflows a float past ε ≈ 709; basic composition is the answer there
    assert advanced_composition(1000.0, 1e-9, 3, 1e-6).epsilon == 3000.0


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


# ---------------------------------------------------------------- issue 11: governing the budget


def test_every_change_of_a_total_is_an_event_with_a_reason(tmp_path):
    from dpsynth.errors import InputError

    led = Ledger(tmp_path / "l.sqlite")
    led.register("ds", PrivacyBudget(1.0, 1e-6), label="people")
    led.charge("ds", PrivacyBudget(0.6, 1e-6), mechanism="m", purpose="p")
    for reason in ("", "   ", None):
        with pytest.raises(InputError, match="reason is required"):
            led.set_total("ds", PrivacyBudget(2.0, 1e-6), reason=reason)
    with pytest.raises(InputError, match=r"ε = 0.5 is below the ε already spent \(0.6\)"):
        led.set_total("ds", PrivacyBudget(0.5, 1e-6), reason="tighten")
    with pytest.raises(InputError, match="δ = 0 is below the δ already spent"):
        led.set_total("ds", PrivacyBudget(3.0, 0.0), reason="no more δ")
    assert led.total("ds") == PrivacyBudget(1.0, 1e-6)  # refused changes changed nothing
    event = led.set_total("ds", PrivacyBudget(4.0, 1e-5), reason="  approved by the\nboard ")
    assert (event.old_epsilon, event.new_epsilon, event.new_delta, event.reason) == (1.0, 4.0, 1e-5, "approved by the board")
    led.set_total("ds", PrivacyBudget(0.6, 1e-6), reason="back down to exactly what is spent")  # allowed: not below
    events = Ledger(tmp_path / "l.sqlite", create=False).budget_events("ds")
    assert [(e.old_epsilon, e.new_epsilon) for e in events] == [(None, 1.0), (1.0, 4.0), (4.0, 0.6)]
    assert events[0].reason.startswith("first total")


@pytest.mark.parametrize("ask, total, exhausted", [
    (PrivacyBudget(0.5, 0.0), PrivacyBudget(1.0, 1e-6), "ε"),
    (PrivacyBudget(0.1, 1e-6), PrivacyBudget(4.0, 1e-6), "δ"),
    (PrivacyBudget(0.5, 1e-6), PrivacyBudget(1.0, 1e-6), "ε and δ"),
])
def test_a_refusal_names_what_is_exhausted_both_remainders_and_the_way_on(tmp_path, ask, total, exhausted):
    led = Ledger(tmp_path / "l.sqlite")
    led.register("ds", total)
    led.charge("ds", PrivacyBudget(0.6, 1e-6), mechanism="m", purpose="p")
    with pytest.raises(BudgetExceededError) as exc:
        led.charge("ds", ask, mechanism="m", purpose="p")
    msg = str(exc.value)
    left = total - PrivacyBudget(0.6, 1e-6)
    assert f"Not enough {exhausted} left" in msg
    assert f"Remaining: ε = {left.epsilon:g}, δ = {left.delta:g}" in msg
    assert "raise this dataset's total" in msg and "with a reason" in msg and "smaller" in msg
    assert exc.value.exhausted == tuple(exhausted.split(" and "))


def test_a_ledger_of_the_earlier_format_is_migrated_and_keeps_its_spends(tmp_path):
    import sqlite3

    path = tmp_path / "old.sqlite"
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE datasets (dataset_id TEXT PRIMARY KEY, label TEXT NOT NULL,
            total_epsilon REAL NOT NULL, total_delta REAL NOT NULL, created TEXT NOT NULL);
        CREATE TABLE spends (spend_id TEXT PRIMARY KEY, dataset_id TEXT NOT NULL REFERENCES datasets(dataset_id),
            time TEXT NOT NULL, mechanism TEXT NOT NULL, epsilon REAL NOT NULL, delta REAL NOT NULL, purpose TEXT NOT NULL);
        INSERT INTO meta VALUES ('format', 'dpsynth-ledger-v1');
        INSERT INTO datasets VALUES ('ds', 'old', 2.0, 0.0, '2025-01-01');
        INSERT INTO spends VALUES ('s1', 'ds', '2025-01-02', 'm', 0.5, 0.0, 'before the archive');
    """)
    con.commit()
    con.close()
    led = Ledger(path, create=False)
    [old] = led.spends("ds")
    assert old.release_id is None and old.purpose == "before the archive"
    led.charge("ds", PrivacyBudget(0.5), mechanism="m", purpose="p", release_id="r1")
    assert [s.release_id for s in Ledger(path, create=False).spends("ds")] == [None, "r1"]
    assert led.budget_events() == []  # no history was invented for the old total
    led.set_total("ds", PrivacyBudget(3.0), reason="more")
    assert [e.old_epsilon for e in led.budget_events("ds")] == [2.0]


def test_charging_for_links_charges_in_its_block_only(tmp_path):
    from dpsynth.accounting import charging_for

    led = Ledger(tmp_path / "l.sqlite")
    led.register("ds", PrivacyBudget(5.0))
    with charging_for("r1"):
        led.charge("ds", PrivacyBudget(0.1), mechanism="m", purpose="in")
        led.charge("ds", PrivacyBudget(0.1), mechanism="m", purpose="explicit", release_id="r2")
    led.charge("ds", PrivacyBudget(0.1), mechanism="m", purpose="out")
    assert [(s.purpose, s.release_id) for s in led.spends("ds")] == [("in", "r1"), ("explicit", "r2"), ("out", None)]
    assert [s.purpose for s in led.spends_for_release("r1")] == ["in"]
