"""Pair factors: measured pairs outside the junction tree's cliques, applied to sampled rows."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from dpsynth.marginals import MarginalModel, fit_marginal_model
from dpsynth.marginals import budget as marginals_budget
from dpsynth.marginals.pair_factors import (
    PairFactor,
    conditional_logits,
    coupled_values,
    distinct_rows,
    expected_table,
    fit_factor,
    grouping,
    target_table,
)
from tests.test_marginals import _check_sampler


def _latent(n: int, seed: int = 0, d: int = 5, k: int = 6) -> tuple[np.ndarray, tuple[int, ...]]:
    """d columns of k values, each a noisy copy of one latent column: every pair depends on every other."""
    rng = np.random.default_rng(seed)
    z = rng.integers(0, k, n)
    cols = [np.where(rng.random(n) < 0.6, z, rng.integers(0, k, n)) for _ in range(d)]
    return np.stack(cols, axis=1).astype(np.int64), (k,) * d


@pytest.fixture(scope="module")
def factored() -> tuple[MarginalModel, np.ndarray, tuple[int, ...]]:
    """Cliques capped at two columns, so most pairs lie outside them and get factors (ε = 30)."""
    codes, sizes = _latent(30_000)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(marginals_budget, "CLIQUE_LIMITS", ((0.0, 36, 2),))
        model = fit_marginal_model(codes, sizes, epsilon=30.0, delta=1e-9, neighbours="add-remove",
                                   rng=np.random.default_rng(1))
    assert model.factors, "the fixture needs pair factors"
    return model, codes, sizes


def _pair_tvd(rows: np.ndarray, codes: np.ndarray, sizes: tuple[int, ...], pair: tuple[int, int]) -> float:
    shape = (sizes[pair[0]], sizes[pair[1]])
    a = np.bincount(np.ravel_multi_index((rows[:, pair[0]], rows[:, pair[1]]), shape), minlength=math.prod(shape))
    b = np.bincount(np.ravel_multi_index((codes[:, pair[0]], codes[:, pair[1]]), shape), minlength=math.prod(shape))
    return 0.5 * float(np.abs(a / a.sum() - b / b.sum()).sum())


def test_conditional_logits_are_the_joint_conditionals(factored) -> None:
    """log P(x_c | rest) from the steps (and factors) equals the conditional read off the full joint."""
    model, _, sizes = factored
    rows = model.sample(300, rng=np.random.default_rng(2))
    tree = MarginalModel(sizes=sizes, steps=model.steps, noisy_total=1.0, measurements=[], noise=[], stages=[])
    log_joint = np.log(np.maximum(tree.joint(), 1e-300))
    f = model.factors[0]
    assert f.kept, "the first factor keeps the tables the tree holds with its column"
    with_f = MarginalModel(sizes=sizes, steps=model.steps, noisy_total=1.0, measurements=[], noise=[], stages=[],
                           factors=(f,))
    # joint() of the tree with the factor is the coupling's law; its log-weight is what it adds to the tree
    extra = np.zeros(sizes)
    for cols, table in ((f.given, f.col), f.log_phi), *((c + (f.col,), lam) for c, lam in f.kept):
        t = table.reshape([sizes[c] for c in cols])
        shape = [1] * len(sizes)
        for c in cols:
            shape[c] = sizes[c]
        extra = extra + np.transpose(t, sorted(range(len(cols)), key=lambda i: cols[i])).reshape(shape)
    assert with_f.joint().shape == tuple(sizes)
    for c in range(len(sizes)):
        for factors, lj in (([], log_joint), ([f], log_joint + extra)):
            got = conditional_logits(model.steps, sizes, factors, rows, c)
            got = np.exp(got - got.max(axis=1, keepdims=True))
            got /= got.sum(axis=1, keepdims=True)
            for i in range(0, len(rows), 17):
                idx = list(rows[i])
                idx[c] = slice(None)
                want = np.exp(lj[tuple(idx)] - lj[tuple(idx)].max())
                np.testing.assert_allclose(got[i], want / want.sum(), atol=1e-9)


def test_coupling_has_the_new_law_and_moves_only_what_it_must() -> None:
    """Current values drawn from q, coupled towards p: the output has law p (χ²) and the share of
    rows changed is the total-variation distance of q and p."""
    rng = np.random.default_rng(3)
    n, k = 200_000, 5
    q = np.array([0.4, 0.3, 0.15, 0.1, 0.05])
    p = np.array([0.2, 0.3, 0.3, 0.05, 0.15])
    current = rng.choice(k, size=n, p=q)
    out = coupled_values(current, np.log(np.tile(q, (n, 1))), np.log(np.tile(p, (n, 1))), rng.random(n))
    assert stats.chisquare(np.bincount(out, minlength=k), p * n).pvalue > 1e-3
    changed = float(np.mean(out != current))
    tv = 0.5 * float(np.abs(p - q).sum())
    assert abs(changed - tv) < 4 * math.sqrt(tv * (1 - tv) / n)
    # a value p gives no mass is never kept; one with p ≥ q always is
    assert np.all(out[current == 1] == 1)


def test_fit_factor_reaches_a_reachable_target_and_skips_unreachable_cells() -> None:
    """Proportional fitting brings the rows' expected (given, col) table to the target; a cell the
    rows cannot take is left out and its target mass goes to the rest of its row."""
    rng = np.random.default_rng(4)
    n, kg, kc = 20_000, 3, 4
    given = rng.integers(0, kg, n)
    logits = rng.normal(size=(n, kc))
    logits[:, 3] = -800.0  # value 3 is out of reach for every row
    target = rng.random((kg, kc)) + 0.1
    counts = np.bincount(given, minlength=kg)
    target = target / target.sum(axis=1, keepdims=True) * counts[:, None]
    (log_phi,) = fit_factor(logits, [given], [target], iters=60)
    w = np.exp(logits + log_phi[given])
    w /= w.sum(axis=1, keepdims=True)
    got = np.zeros((kg, kc))
    np.add.at(got, given, w)
    want = target.copy()
    want[:, 3] = 0.0
    want = want / want.sum(axis=1, keepdims=True) * counts[:, None]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    assert np.all(log_phi[:, 3] == 0.0)


def test_expected_table_sums_each_configuration_rows_exactly() -> None:
    """The grouping matrix's product is the same floating-point sum as a bincount over (configuration,
    category) in row order: bit for bit, so releases do not change with it; empty configurations are 0."""
    rng = np.random.default_rng(4)
    rows, k, configs = 5_000, 7, 40
    cfg = rng.integers(0, configs - 3, rows)  # the last three configurations hold no row
    for p in (rng.random((rows, k)), rng.random((rows, k)).astype(np.float32)):
        flat = (cfg[:, None] * k + np.arange(k)[None, :]).ravel()
        want = np.bincount(flat, weights=p.ravel(), minlength=configs * k).reshape(configs, k)
        got = expected_table(p, grouping(cfg, configs))
        assert got.dtype == np.float64 and got.shape == (configs, k)
        assert np.array_equal(got, want)
        assert not got[-3:].any()


def test_distinct_rows_lists_each_combination_once_with_its_rows() -> None:
    """One first row per distinct combination of the columns (a float matrix and integer vectors, compared
    byte for byte), and as many rows counted for it as share it."""
    rng = np.random.default_rng(5)
    n = 3_000
    a = rng.integers(0, 4, n)
    b = rng.integers(0, 3, n)
    q = rng.normal(size=(6, 5))[rng.integers(0, 6, n)]  # six distinct rows of logits
    first, counts = distinct_rows(q, a, b)
    assert counts.sum() == n
    keys = [(q[i].tobytes(), a[i], b[i]) for i in range(n)]
    assert len(set(keys)) == len(first) == len({keys[i] for i in first})
    for i, c in zip(first, counts, strict=True):
        assert c == sum(k == keys[i] for k in keys)


def test_fit_factor_fits_repeated_rows_as_the_rows_themselves() -> None:
    """Rows that share their logits, configurations and current value are fitted once, weighted: the weights
    come out as when every row is fitted on its own (made distinct by a constant added to each row's logits,
    which leaves its law unchanged), with and without current values."""
    rng = np.random.default_rng(6)
    n, kg, kc = 20_000, 4, 5
    parent = rng.integers(0, 8, n)
    logits = rng.normal(size=(8, kc))[parent]
    given = (parent + rng.integers(0, 2, n)) % kg
    other = rng.integers(0, 3, n)
    current = rng.integers(0, kc, n)
    counts = np.bincount(given, minlength=kg)
    target = rng.random((kg, kc)) + 0.2
    target = target / target.sum(axis=1, keepdims=True) * counts[:, None]
    kept = np.bincount(other * kc + current, minlength=3 * kc).reshape(3, kc).astype(np.float64)
    spread = logits + np.arange(n)[:, None] * 2.0**-20  # every row distinct, the same law
    assert len(distinct_rows(spread)[0]) == n and len(distinct_rows(logits, other, given, current)[0]) <= 8 * 3 * 2 * kc
    for cur in (None, current):
        fast = fit_factor(logits, [other, given], [kept, target], iters=8, current=cur)
        slow = fit_factor(spread, [other, given], [kept, target], iters=8, current=cur)
        for f, s in zip(fast, slow, strict=True):
            np.testing.assert_allclose(f, s, rtol=1e-5, atol=1e-6)


def test_target_takes_differences_beyond_the_noise_only() -> None:
    """Soft thresholding: a measured cell within one noise sd of the model keeps the model's count,
    one further off moves by the excess; each row keeps the model's row count."""
    current = np.array([[100.0, 100.0], [50.0, 150.0]])
    noisy = np.array([[105.0, 96.0], [130.0, 70.0]])
    t = target_table(noisy, 10.0, current)
    np.testing.assert_allclose(t[0], [100.0, 100.0])
    # row 1: 50 → 120 (excess 70), 150 → 80 (excess 70), then scaled to the row's 200 rows
    np.testing.assert_allclose(t[1], [120.0, 80.0] / np.float64(200.0) * 200.0)
    np.testing.assert_allclose(t.sum(axis=1), current.sum(axis=1))


def test_sampler_follows_the_law_with_factors(factored) -> None:
    """Sampled rows follow the exact law of the sampling procedure (the tree, then each factor's
    coupling step, :meth:`MarginalModel.joint`) on every pair (χ², as for the tree alone)."""
    model, _, sizes = factored
    _check_sampler(model, sizes)


def test_factors_mend_the_pairs_outside_the_cliques(factored) -> None:
    """At a large ε each factor's pair in the sampled rows comes close to the data's, far closer
    than the tree alone puts it."""
    model, codes, sizes = factored
    tree = MarginalModel(sizes=sizes, steps=model.steps, noisy_total=model.noisy_total, measurements=[],
                         noise=[], stages=[])
    with_f = model.sample(len(codes), rng=np.random.default_rng(6))
    without = tree.sample(len(codes), rng=np.random.default_rng(6))
    for f in model.factors:
        pair = (min(f.given, f.col), max(f.given, f.col))
        before, after = _pair_tvd(without, codes, sizes, pair), _pair_tvd(with_f, codes, sizes, pair)
        assert after < 0.5 * before and after < 0.03, (pair, before, after)
    # a column an earlier factor conditions on is never redrawn
    for j, f in enumerate(model.factors):
        assert f.col not in {e.given for e in model.factors[:j]}


def test_factors_are_released_measurements_and_round_trip(factored) -> None:
    """Each factor's pair is a released noisy measurement with its noise and cost recorded; the
    spend stays within the budget; model.json restores a model that samples identically."""
    model, _, _ = factored
    measured = {c for c, _ in model.measurements}
    for f in model.factors:
        assert (min(f.given, f.col), max(f.given, f.col)) in measured
    assert model.params["rho_spent"] <= model.params["rho_budget"]
    assert sum(s["rho"] for s in model.stages) == pytest.approx(model.params["rho_spent"], rel=1e-12)
    assert model.params["capacity"]["pair_factors"] == len(model.factors)
    assert f"{len(model.factors)} applied as factors" in model.params["capacity"]["text"]
    assert model.params["capacity"]["pair_factor_measurements"] >= len(model.factors)
    back = MarginalModel.from_dict(json.loads(json.dumps(model.to_dict())))
    assert len(back.factors) == len(model.factors)
    a = model.sample(5_000, rng=np.random.default_rng(7))
    b = back.sample(5_000, rng=np.random.default_rng(7))
    np.testing.assert_array_equal(a, b)


def test_factor_json_is_checked() -> None:
    """A malformed factor in model.json is refused, not sampled."""
    sizes = (2, 3)
    good = PairFactor(0, 1, np.zeros((2, 3))).to_dict()
    assert PairFactor.from_dict(good, sizes).log_phi.shape == (2, 3)
    for bad in ({**good, "col": 0}, {**good, "given": 5}, {**good, "log_phi": [0.0] * 5},
                {**good, "log_phi": [float("nan")] * 6}):
        with pytest.raises(ValueError):
            PairFactor.from_dict(bad, sizes)


def test_a_pair_the_model_already_has_is_measured_but_not_applied() -> None:
    """Independent columns the tree keeps apart: their measured pair matches the model's table within
    the noise, so no factor redraws a column for it (it would only add noise); the measurement is
    still released and its cost counted."""
    rng = np.random.default_rng(9)
    n = 20_000
    z = rng.integers(0, 4, n)
    codes = np.stack([z, np.where(rng.random(n) < 0.8, z, rng.integers(0, 4, n)), rng.integers(0, 4, n),
                      rng.integers(0, 4, n)], axis=1).astype(np.int64)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(marginals_budget, "CLIQUE_LIMITS", ((0.0, 16, 2),))
        model = fit_marginal_model(codes, (4, 4, 4, 4), epsilon=30.0, delta=1e-9, neighbours="add-remove",
                                   rng=np.random.default_rng(10))
    cap = model.params["capacity"]
    assert cap["pair_factor_measurements"] > len(model.factors)
    assert sum(s["rho"] for s in model.stages) == pytest.approx(model.params["rho_spent"], rel=1e-12)


def test_no_factors_where_the_pairs_are_noise() -> None:
    """Below the signal-to-noise of the first tier (a small table at a small ε) no factor round is
    planned: a noisy pair measurement would only add noise (Titanic at ε = 1: +0.003 / +0.004 TVD)."""
    codes, sizes = _latent(2_000, d=6)
    model = fit_marginal_model(codes, sizes, epsilon=0.5, delta=1e-9, neighbours="add-remove",
                               rng=np.random.default_rng(8))
    cap = model.params["capacity"]
    assert cap["pair_snr"] < marginals_budget.PAIR_FACTOR_TIERS[0][0]
    assert cap["pair_factors"] == 0 and not model.factors


def test_the_factor_rounds_spend_their_budget_when_the_factors_use_up_the_pairs() -> None:
    """Each factor holds two columns, and a pair of two held columns is no candidate, so on ten columns
    that all lean on one latent column (ε = 10) the pairs run out before the planned factor rounds do. A
    round plans for no more rounds than pairs are left, and the one after which none would be left takes
    the rest: the release spends its whole budget (before, 94% here; Wages, DoctorContacts and diamonds
    left 3–10%)."""
    import re

    g = np.random.default_rng(0)
    n, d = 8_000, 10
    z = g.integers(0, 4, n)
    codes = np.column_stack([np.clip(z + g.integers(-1, 2, n) + (j % 3) * (g.random(n) < 0.3), 0, 5)
                             for j in range(d)]).astype(np.int64)
    sizes = (6,) * d
    for seed in range(2):
        model = fit_marginal_model(codes, sizes, epsilon=10.0, delta=1e-9, neighbours="add-remove",
                                   rng=np.random.default_rng(seed))
        cap = model.params["capacity"]
        planned = int(re.search(r"up to (\d+) pairs outside the cliques", cap["text"]).group(1))
        assert 0 < cap["pair_factor_measurements"] < planned
        assert model.params["rho_spent"] == pytest.approx(model.params["rho_budget"], rel=1e-6)
        assert sum(s["rho"] for s in model.stages) == pytest.approx(model.params["rho_spent"], rel=1e-12)


def test_factors_are_fitted_on_a_working_sample_of_fixed_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """The working sample the factors are scored and fitted on has ``FACTOR_WORK_ROWS`` rows however small
    the table (a public constant): fitted on a sample of the table's own size, a factor's terms (up to a
    hundred configurations × a column's categories) followed that sample's chance sparsity, and on a real
    table of 7,874 rows one release in six drew a 51-bin column 0.26 in TVD from its one-way."""
    from dpsynth.marginals import fit as marginals_fit

    drawn: list[int] = []
    sample = MarginalModel.sample

    def spy(self: MarginalModel, n_rows: int, *, rng: np.random.Generator) -> np.ndarray:
        drawn.append(n_rows)
        return sample(self, n_rows, rng=rng)

    monkeypatch.setattr(MarginalModel, "sample", spy)
    monkeypatch.setattr(marginals_budget, "CLIQUE_LIMITS", ((0.0, 36, 2),))
    codes, sizes = _latent(2_000)
    model = fit_marginal_model(codes, sizes, epsilon=30.0, delta=1e-9, neighbours="add-remove",
                               rng=np.random.default_rng(3))
    assert model.factors
    assert drawn == [marginals_fit.FACTOR_WORK_ROWS]
    assert model.noisy_total < marginals_fit.FACTOR_WORK_ROWS / 10


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_reductions_equal_numpys(dtype) -> None:
    """The column-wise row maximum and sum of tall tables give numpy's own results: the maximum bit for
    bit, the sum to rounding (bit for bit with numpy 2's pairwise order, which a later numpy may change)."""
    from dpsynth.marginals.pair_factors import _row_max, _row_sum

    g = np.random.default_rng(0)
    for k in range(1, 40):
        x = (g.random((3000, k)) * g.random((3000, 1)) ** 8 - 0.1).astype(dtype)
        assert np.array_equal(_row_max(x), x.max(axis=1))
        bound = 2 * k * np.finfo(dtype).eps * np.abs(x).sum(axis=1)  # any summation order's rounding
        assert np.all(np.abs(_row_sum(x) - x.sum(axis=1)) <= bound), k


def test_a_factor_is_kept_only_if_it_helps_its_pair_more_than_it_moves_a_kept_table() -> None:
    from dpsynth.marginals.fit import _factor_helps

    rng = np.random.default_rng(0)
    n, k = 4000, 3
    other = rng.integers(0, 2, n)  # a kept table's other column
    given = rng.integers(0, 2, n)  # the factor's pair's other column
    old = rng.integers(0, k, n)
    kept_before = np.bincount(other * k + old, minlength=2 * k).reshape(2, k)
    target = np.bincount(given * k + old, minlength=2 * k).reshape(2, k).astype(float)
    target += [[100.0, -100.0, 0.0], [-100.0, 100.0, 0.0]]  # more 0s where given = 0, more 1s where given = 1
    cfgs, targets = [other, given], [kept_before, target]
    assert not _factor_helps(old, old.copy(), k, cfgs, targets)  # nothing moved: no gain
    # 1 → 0 where given = 0 and as many 0 → 1 where given = 1, each within one value of ``other``: the
    # kept table stays as it was
    better = old.copy()
    for o in (0, 1):
        a = np.flatnonzero((other == o) & (given == 0) & (old == 1))[:40]
        b = np.flatnonzero((other == o) & (given == 1) & (old == 0))[:40]
        better[a], better[b] = 0, 1
    assert _factor_helps(old, better, k, cfgs, targets)
    # the same moves, and within each value of ``given`` 100 rows 2 → 0 where other = 1 and 100 rows 0 → 2
    # where other = 0: the pair's table as before, the kept table moved by 800
    broken = better.copy()
    for g in (0, 1):
        broken[np.flatnonzero((given == g) & (other == 1) & (better == 2))[:100]] = 0
        broken[np.flatnonzero((given == g) & (other == 0) & (better == 0))[:100]] = 2
    assert not _factor_helps(old, broken, k, cfgs, targets)
    # moves that take the pair away from its target: refused
    assert not _factor_helps(better, old, k, cfgs, [np.bincount(other * k + better, minlength=2 * k).reshape(2, k),
                                                     target])


def test_a_factor_whose_fit_fails_is_not_applied(monkeypatch: pytest.MonkeyPatch) -> None:
    """A factor whose weights leave its pair no closer to its target (here: weights at random, as a fit that
    cannot meet its targets may leave them) is dropped; its measurement stays spent and released."""
    from dpsynth.marginals import fit as marginals_fit

    def failed_fit(q_logits, cfgs, targets, iters=4, current=None):
        g = np.random.default_rng(0)
        return [3.0 * g.standard_normal((len(t), q_logits.shape[1])) for t in targets]

    monkeypatch.setattr(marginals_budget, "CLIQUE_LIMITS", ((0.0, 36, 2),))
    codes, sizes = _latent(30_000)
    kept = fit_marginal_model(codes, sizes, epsilon=30.0, delta=1e-9, neighbours="add-remove",
                              rng=np.random.default_rng(1))
    monkeypatch.setattr(marginals_fit, "fit_factor", failed_fit)
    model = fit_marginal_model(codes, sizes, epsilon=30.0, delta=1e-9, neighbours="add-remove",
                               rng=np.random.default_rng(1))
    assert kept.factors and not model.factors
    assert model.params["capacity"]["pair_factor_measurements"] > 0
    assert sum(s["rho"] for s in model.stages) == pytest.approx(model.params["rho_spent"], rel=1e-12)
