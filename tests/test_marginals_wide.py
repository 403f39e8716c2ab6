"""Wide tables (100 columns × 50,000 rows): time, and one-column accuracy never below independent
noisy one-way marginals spending the whole budget (issue 14)."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from dpsynth.marginals import fit_marginal_model
from dpsynth.marginals.budget import Plan
from dpsynth.marginals.estimation import project_simplex
from dpsynth.neighbours import Neighbours
from dpsynth.schema import CategoricalColumn, NumericColumn, Schema
from tests.wide_table import wide_table

#: The mean of three releases' one-column TVD varies by several percent with their noise, and the
#: requirement is on its expectation: the tests below allow this factor over the yardstick's expected
#: value (the defects they guard against were 1.6× and 50×).
RELEASE_NOISE = 1.1


def _one_way_tvd(codes: np.ndarray, sizes: tuple[int, ...], probs: list[np.ndarray]) -> float:
    n = len(codes)
    return float(np.mean([0.5 * np.abs(np.bincount(codes[:, j], minlength=s) / n - probs[j]).sum()
                          for j, s in enumerate(sizes)]))


def test_wide_table_time_and_one_way_accuracy() -> None:
    """100 columns: the release's one-column marginals are at least as close to the data as
    independent noisy one-ways at the same ε (same exact mechanism, whole budget on one-ways),
    the chained pairs are far better than independence, and the fit takes well under a minute
    (the 20 s target is for 2 idle cores; the bound here is loose for a shared machine)."""
    codes, sizes = wide_table(50_000, 100, seed=0)
    eps, delta = 1.0, 1e-9
    plan = Plan(eps, delta, Neighbours.parse("add-remove"), 1)
    mech = plan.preview(plan.total / len(sizes))
    # One release's one-column error varies by ±5% with the noise: compare means over 3 releases
    # and 3 draws of the baseline (the requirement is on the expected error).
    ours, baseline, seconds = [], [], []
    for s in range(3):
        t0 = time.perf_counter()
        model = fit_marginal_model(codes, sizes, epsilon=eps, delta=delta, neighbours="add-remove",
                                   rng=np.random.default_rng(1 + 10 * s))
        seconds.append(time.perf_counter() - t0)
        assert model.params["capacity"]["wide"]
        assert model.params["capacity"]["rounds"] > 0  # pairs are still measured
        ours.append(_one_way_tvd(codes, sizes, [model.marginal((j,)) for j in range(len(sizes))]))
        baseline.append(_independent_one_way_tvd(codes, sizes, mech, np.random.default_rng(2 + 10 * s)))
    assert np.mean(ours) <= np.mean(baseline), (ours, baseline)

    # Dependence inside the generated chains survives (columns 0–4 form a chain).
    rows = model.sample(50_000, rng=np.random.default_rng(3))
    real01 = np.bincount(codes[:, 0] * sizes[1] + codes[:, 1], minlength=sizes[0] * sizes[1]) / len(codes)
    syn01 = np.bincount(rows[:, 0] * sizes[1] + rows[:, 1], minlength=sizes[0] * sizes[1]) / len(rows)
    indep = np.outer(real01.reshape(sizes[0], sizes[1]).sum(1), real01.reshape(sizes[0], sizes[1]).sum(0)).ravel()
    assert 0.5 * np.abs(syn01 - real01).sum() < 0.25 * 0.5 * np.abs(indep - real01).sum()
    assert min(seconds) < 90, seconds


def _independent_one_way_tvd(codes: np.ndarray, sizes: tuple[int, ...], mech: object,
                             rng: np.random.Generator) -> float:
    """One draw of the yardstick: each column's one-way counts through ``mech``, projected onto counts."""
    base = []
    for j, sz in enumerate(sizes):
        y = mech(np.bincount(codes[:, j], minlength=sz), rng=rng)  # type: ignore[operator]
        p = project_simplex(y, max(float(y.sum()), 1.0))
        base.append(p / p.sum())
    return _one_way_tvd(codes, sizes, base)


def _releases_against_independent(codes: np.ndarray, sizes: tuple[int, ...], seed: int,
                                  releases: int = 3, draws: int = 40, epsilon: float = 1.0,
                                  delta: float = 1e-9) -> tuple[float, float, object]:
    """Mean one-column TVD of ``releases`` wide-path releases at (ε, δ), the expected one-column TVD of
    independent noisy one-ways spending the whole budget (same exact mechanism; mean of ``draws``
    draws), and the last release's model."""
    plan = Plan(epsilon, delta, Neighbours.parse("add-remove"), 1)
    mech = plan.preview(plan.total / len(sizes))
    ours = []
    for s in range(releases):
        model = fit_marginal_model(codes, sizes, epsilon=epsilon, delta=delta, neighbours="add-remove",
                                   rng=np.random.default_rng(seed + s))
        assert model.params["capacity"]["wide"]
        ours.append(_one_way_tvd(codes, sizes, [model.marginal((j,)) for j in range(len(sizes))]))
    g = np.random.default_rng(1000 + seed)
    baseline = float(np.mean([_independent_one_way_tvd(codes, sizes, mech, g) for _ in range(draws)]))
    return float(np.mean(ours)), baseline, model


def test_a_long_chain_of_dependent_columns_keeps_its_one_way_accuracy() -> None:
    """A 40-column random walk in 8 bins (each column the running mean of the ones before, so every
    column depends strongly on the next): the wide path's raking of the one-ways must converge, not
    overshoot. With a fixed damped Jacobi step of one half the one-column TVD went from 0.009 to
    0.46; it must stay at or below that of independent noisy one-ways spending the whole budget
    (mean over 3 releases, within their noise: :data:`RELEASE_NOISE`), and the neighbouring pairs far
    from independence."""
    n, d = 30_000, 40
    z = np.random.default_rng(0).normal(size=(n, d)).cumsum(axis=1) / np.sqrt(np.arange(1, d + 1))
    codes = np.clip(((z * 10 + 50) // 12.5).astype(np.int64), 0, 7)
    sizes = (8,) * d
    ours, baseline, model = _releases_against_independent(codes, sizes, seed=5)
    assert ours <= RELEASE_NOISE * baseline, (ours, baseline)
    rows = model.sample(n, rng=np.random.default_rng(3))
    for a in (0, 20, 38):
        real = np.bincount(codes[:, a] * 8 + codes[:, a + 1], minlength=64) / n
        syn = np.bincount(rows[:, a] * 8 + rows[:, a + 1], minlength=64) / n
        indep = np.outer(real.reshape(8, 8).sum(1), real.reshape(8, 8).sum(0)).ravel()
        assert 0.5 * np.abs(syn - real).sum() < 0.25 * 0.5 * np.abs(indep - real).sum()


def test_many_near_copies_of_one_binary_column_keep_their_one_way_accuracy() -> None:
    """Sixty binary columns, each one hidden bit flipped for 5% of the rows: every column's raking
    correction moves all the others', so the damped steps must shrink to about 1/60 and still gain
    (with the total-variation distance as the raking's yardstick the step collapsed first and the
    one-column TVD was 1.6× that of independent noisy one-ways). Mean over 3 releases, within their
    noise (:data:`RELEASE_NOISE`)."""
    n, d = 20_000, 60
    g = np.random.default_rng(0)
    h = g.integers(0, 2, n)
    codes = np.stack([h ^ (g.random(n) < 0.05) for _ in range(d)], axis=1).astype(np.int64)
    sizes = (2,) * d
    ours, baseline, _ = _releases_against_independent(codes, sizes, seed=1)
    assert ours <= RELEASE_NOISE * baseline, (ours, baseline)


def test_one_way_accuracy_holds_as_epsilon_grows_and_under_pure_dp() -> None:
    """The one-way fallback compares noise alone, at every ε: its former rule added the sampling error of
    n rows to both sides, which the synthetic rows do not have (controlled rounding), so as ε grew the
    one-ways' share fell and on 40 columns × 20,000 rows the one-column TVD came out 1.40 × that of
    independent noisy one-ways at ε = 10 (1.60 × under pure DP, where a first installment of 5% of ε also
    cost 1.036 × at ε = 1). Mean over 3 releases within their noise (:data:`RELEASE_NOISE`); at ε = 10 the
    pairs are still measured, and the chained ones stay far from independence."""
    n, d = 20_000, 40
    codes, sizes = wide_table(n, d, seed=0)
    for epsilon, delta in ((10.0, 1e-9), (10.0, 0.0)):
        ours, baseline, model = _releases_against_independent(codes, sizes, seed=1, epsilon=epsilon, delta=delta)
        assert ours <= RELEASE_NOISE * baseline, (epsilon, delta, ours, baseline)
        assert model.params["capacity"]["rounds"] > 0
    # a model at ε = 10 under zCDP keeps the chains' dependence (the pure-DP one above is only checked to measure pairs)
    zcdp = fit_marginal_model(codes, sizes, epsilon=10.0, delta=1e-9, neighbours="add-remove",
                              rng=np.random.default_rng(7))
    rows = zcdp.sample(n, rng=np.random.default_rng(3))
    real01 = np.bincount(codes[:, 0] * sizes[1] + codes[:, 1], minlength=sizes[0] * sizes[1]) / n
    syn01 = np.bincount(rows[:, 0] * sizes[1] + rows[:, 1], minlength=sizes[0] * sizes[1]) / n
    indep = np.outer(real01.reshape(sizes[0], sizes[1]).sum(1), real01.reshape(sizes[0], sizes[1]).sum(0)).ravel()
    assert 0.5 * np.abs(syn01 - real01).sum() < 0.1 * 0.5 * np.abs(indep - real01).sum()
    # at ε = 1 under pure DP no pair is worth its cost: the one-ways take the budget in one large installment
    ours, baseline, model = _releases_against_independent(codes, sizes, seed=1, epsilon=1.0, delta=0.0)
    assert model.params["capacity"]["rounds"] == 0
    assert ours <= baseline, (ours, baseline)


def _mixed_wide_frame(n: int, d: int, numeric_every: int, seed: int) -> tuple[pd.DataFrame, Schema]:
    """:func:`tests.wide_table.wide_table`'s codes as a table to release: every ``numeric_every``-th column a
    whole number with ten values per bin (so the value model describes it), the others categories."""
    codes, sizes = wide_table(n, d, seed=seed)
    g = np.random.default_rng(seed + 1)
    data, cols = {}, []
    for j, s in enumerate(sizes):
        name = f"c{j}"
        if j % numeric_every == 0:
            data[name] = (codes[:, j] * 10 + g.integers(0, 10, n)).astype(str)
            cols.append(NumericColumn(name=name, lower=0, upper=10 * s, bins=s, integer=True))
        else:
            data[name] = np.array([f"v{k}" for k in range(s)])[codes[:, j]]
            cols.append(CategoricalColumn(name=name, categories=tuple(f"v{k}" for k in range(s))))
    return pd.DataFrame(data), Schema(tuple(cols))


def test_a_small_wide_release_with_numeric_columns_keeps_its_one_way_accuracy() -> None:
    """A whole release (value model included) of 30 columns, 12 of them numeric, at 2,000 rows and ε = 1: the
    value model's share comes out of every column's one-way, categorical ones included, and had grown with the
    numeric columns to a quarter of ρ (and 10% of ε under pure DP), so the synthetic rows' one-column TVD came
    out above that of independent noisy one-ways spending the whole budget. On the wide path the share no
    longer grows with the numeric columns (zCDP) and is :data:`dpsynth.value_model.WIDE_VALUE_SHARE` under
    pure DP: the mean over 3 releases is at or below the yardstick (the mean of 40 draws)."""
    from dpsynth.binning import encode
    from dpsynth.release import release

    df, schema = _mixed_wide_frame(2_000, 30, 5, seed=3)
    codes, sizes = encode(df, schema).codes, tuple(schema.sizes)
    for delta in (1e-9, 0.0):
        ours = []
        for s in range(3):
            rel = release(df, schema, epsilon=1.0, delta=delta, method="marginals", rng=np.random.default_rng(40 + s))
            assert rel.values is not None and rel.card["mechanism"]["capacity"]["wide"]
            syn = encode(rel.synthetic, schema).codes
            ours.append(_one_way_tvd(codes, sizes, [np.bincount(syn[:, j], minlength=k) / len(syn)
                                                     for j, k in enumerate(sizes)]))
        plan = Plan(1.0, delta, Neighbours.parse("add-remove"), 1)
        mech = plan.preview(plan.total / len(sizes))
        g = np.random.default_rng(7)
        baseline = float(np.mean([_independent_one_way_tvd(codes, sizes, mech, g) for _ in range(40)]))
        assert np.mean(ours) <= baseline, (delta, ours, baseline)
