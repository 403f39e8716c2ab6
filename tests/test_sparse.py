"""The sparse path draws the released (clamped, thresholded) noisy histogram with the dense path's law."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpsynth import noise
from dpsynth.errors import InputError
from dpsynth.mechanisms import DiscreteGaussian, DiscreteLaplace, Mechanism
from dpsynth.schema import CategoricalColumn, NumericColumn, Schema
from dpsynth.sparse import (
    dense_equivalent,
    empty_positions,
    laplace_at_least,
    noise_sparse,
    sample_cells_sparse,
    sample_without_replacement,
    sparse_histogram_frame,
    synthesize_sparse,
)

P_MIN = 1e-4


def _occupied(n_cells: int, m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    cells = np.sort(rng.choice(n_cells, m, replace=False))
    return cells, rng.integers(1, 40, m)


def _two_sample_p(a: np.ndarray, b: np.ndarray, cap: int) -> float:
    """Chi-square homogeneity test of two samples of non-negative integers (values ≥ cap pooled)."""
    ta = np.bincount(np.minimum(a, cap), minlength=cap + 1)
    tb = np.bincount(np.minimum(b, cap), minlength=cap + 1)
    table = np.array([ta, tb])
    table = table[:, table.sum(axis=0) >= 10]
    return float(stats.chi2_contingency(table)[1])


@pytest.mark.parametrize(
    ("mech", "method", "tau"),
    [
        (DiscreteLaplace.calibrate(1.0, "add-remove"), "skip", 1),
        (DiscreteLaplace.calibrate(0.5, "replace-one"), "skip", 4),
        (DiscreteGaussian.calibrate(1.0, 1e-6, "add-remove"), "stream", 1),
        (DiscreteLaplace.calibrate(1.0, "add-remove"), "stream", 2),
    ],
    ids=["laplace-skip", "laplace-skip-threshold", "gaussian-stream", "laplace-stream-threshold"],
)
def test_empty_cells_have_the_dense_law(mech: Mechanism, method: str, tau: int) -> None:
    """Counts of empty cells per released value (after clamping/thresholding): sparse vs dense, chi-square."""
    n_cells = 400_000
    cells, counts = _occupied(n_cells, 3_000, seed=1)
    rng = noise.seeded_rng(11)
    sp = noise_sparse(cells, counts, n_cells, mech, rng=rng, threshold=tau, method=method)
    empty = np.ones(n_cells, dtype=bool)
    empty[cells] = False
    sparse_vals = dense_equivalent(sp)[empty]
    full = np.zeros(n_cells, dtype=np.int64)
    full[cells] = counts
    dense = mech(full, rng=rng)
    dense_vals = np.where(dense >= tau, dense, 0)[empty]
    assert _two_sample_p(sparse_vals, dense_vals, cap=15) > P_MIN
    # occupied cells: released value is max(count + Z, 0) thresholded, Z from the same sampler
    occ_sparse = dense_equivalent(sp)[cells] - counts
    occ_dense = dense[cells] - counts
    kept = (dense_equivalent(sp)[cells] > 0) & (np.where(dense >= tau, dense, 0)[cells] > 0)
    assert stats.ks_2samp(occ_sparse[kept], occ_dense[kept]).pvalue > P_MIN


def test_positions_of_surviving_empty_cells_are_uniform() -> None:
    n_cells = 200_000
    cells, counts = _occupied(n_cells, 50_000, seed=2)
    mech = DiscreteLaplace.calibrate(1.0, "add-remove")
    sp = noise_sparse(cells, counts, n_cells, mech, rng=noise.seeded_rng(3))
    occupied = np.zeros(n_cells, dtype=bool)
    occupied[cells] = True
    new = sp.cells[~occupied[sp.cells]]
    # rank among empty cells, bucketed: uniform over 20 equal buckets
    rank = new - np.searchsorted(cells, new)
    hist = np.bincount(rank * 20 // (n_cells - len(cells)), minlength=20)
    assert stats.chisquare(hist).pvalue > P_MIN
    assert not np.any(np.diff(sp.cells) <= 0)


@pytest.mark.parametrize("method", ["skip", "stream"])
def test_noisy_total_has_the_dense_law(method: str) -> None:
    """The unclamped total (default synthetic row count): 300 replicates each, KS two-sample test."""
    n_cells, reps = 3_000, 300
    cells, counts = _occupied(n_cells, 100, seed=4)
    mech = DiscreteLaplace.calibrate(0.7, "add-remove")
    rng = noise.seeded_rng(5)
    full = np.zeros(n_cells, dtype=np.int64)
    full[cells] = counts
    sparse_totals = [noise_sparse(cells, counts, n_cells, mech, rng=rng, method=method, threshold=2).total for _ in range(reps)]
    dense_totals = [int(mech(full, rng=rng).sum()) for _ in range(reps)]
    assert stats.ks_2samp(sparse_totals, dense_totals).pvalue > P_MIN
    assert abs(np.mean(sparse_totals) - counts.sum()) < 5 * mech.noise_std() * np.sqrt(n_cells / reps)


def test_conditional_tail_is_geometric() -> None:
    mech = DiscreteLaplace.calibrate(1.0, "add-remove")
    p = np.exp(-1.0)
    draws = laplace_at_least(mech.scale, 3, 50_000, rng=noise.seeded_rng(6))
    assert draws.min() >= 3
    k = np.arange(0, 12)
    expected = (1 - p) * p**k
    expected = np.append(expected, 1 - expected.sum()) * len(draws)
    observed = np.bincount(np.minimum(draws - 3, 12), minlength=13)
    assert stats.chisquare(observed, expected).pvalue > P_MIN


def test_sample_without_replacement_is_uniform_and_exact() -> None:
    rng = noise.seeded_rng(7)
    pop, k, reps = 30, 7, 20_000
    incl = np.zeros(pop, dtype=np.int64)
    for _ in range(reps):
        s = sample_without_replacement(pop, k, rng=rng)
        assert len(s) == k and len(np.unique(s)) == k and np.all(np.diff(s) > 0)
        incl += np.bincount(s, minlength=pop)
    assert stats.chisquare(incl).pvalue > P_MIN
    big = sample_without_replacement(10**15, 1000, rng=rng)
    assert len(np.unique(big)) == 1000 and big.max() < 10**15
    assert len(sample_without_replacement(10, 9, rng=rng)) == 9  # complement path
    assert len(sample_without_replacement(10, 10, rng=rng)) == 10
    with pytest.raises(InputError):
        sample_without_replacement(5, 6, rng=rng)


def test_empty_positions_against_brute_force() -> None:
    rng = np.random.default_rng(8)
    n = 1000
    occ = np.sort(rng.choice(n, 300, replace=False))
    empty = np.setdiff1d(np.arange(n), occ)
    ranks = np.arange(len(empty))
    np.testing.assert_array_equal(empty_positions(ranks, occ), empty)
    np.testing.assert_array_equal(empty_positions(ranks, np.zeros(0, dtype=np.int64)), ranks)


def test_synthesis_from_sparse_histogram() -> None:
    schema = Schema((
        NumericColumn(name="a", lower=0, upper=10_000, bins=1000, integer=True),
        NumericColumn(name="b", lower=0, upper=1, bins=1000),
        CategoricalColumn(name="c", categories=tuple(f"k{i}" for i in range(200)), missing=True),
    ))
    n_cells = schema.n_cells  # 201 million: no dense vector is ever allocated
    cells, counts = _occupied(5_000_000, 500, seed=9)
    mech = DiscreteLaplace.calibrate(2.0, "add-remove")
    sp = noise_sparse(cells * 40, counts * 50, n_cells, mech, rng=noise.seeded_rng(10), threshold=12)
    assert sp.n_cells == n_cells and len(sp.cells) < 10_000
    rng = noise.seeded_rng(12)
    drawn = sample_cells_sparse(sp, 200_000, rng=rng)
    assert np.isin(drawn, sp.cells).all()
    idx = np.searchsorted(sp.cells, drawn)
    observed = np.bincount(idx, minlength=len(sp.cells))
    expected = sp.values / sp.values.sum() * len(drawn)
    big = expected >= 5
    assert stats.chisquare(observed[big], expected[big] * observed[big].sum() / expected[big].sum()).pvalue > P_MIN
    df = synthesize_sparse(sp, schema, 1000, rng=rng)
    assert list(df.columns) == ["a", "b", "c"] and len(df) == 1000
    frame = sparse_histogram_frame(sp, schema)
    assert len(frame) == len(sp.cells) and (frame["count"] >= 12).all()


def test_rejects_bad_input() -> None:
    mech = DiscreteGaussian.calibrate(1.0, 1e-6, "add-remove")
    with pytest.raises(InputError):
        noise_sparse(np.array([1]), np.array([1]), 10, mech, rng=noise.seeded_rng(1), method="skip")
    with pytest.raises(InputError):
        noise_sparse(np.array([1, 1]), np.array([1, 1]), 10, mech, rng=noise.seeded_rng(1))
    with pytest.raises(InputError):
        noise_sparse(np.array([1]), np.array([1]), 10, mech, rng=noise.seeded_rng(1), threshold=0)


def test_caller_generator_state_does_not_depend_on_the_data() -> None:
    """Occupied cells (data) draw from child streams: the caller's generator advances by a fixed amount."""
    mech = DiscreteLaplace.calibrate(1.0, "add-remove")
    after = []
    for m in (10, 5_000):
        cells, counts = _occupied(100_000, m, seed=m)
        rng = noise.seeded_rng(42)
        noise_sparse(cells, counts, 100_000, mech, rng=rng, threshold=3)
        after.append(rng.integers(0, 2**63, 4).tolist())
    assert after[0] == after[1]


@pytest.mark.parametrize("mech", [DiscreteLaplace.calibrate(1.0, "add-remove"),
                                  DiscreteLaplace.calibrate(0.3, "replace-one"),
                                  DiscreteGaussian.calibrate(1.0, 1e-6, "add-remove")], ids=["lap1", "lap03", "gauss"])
@pytest.mark.parametrize("tau", [1, 2, 5])
def test_upper_tail_mean_matches_the_noise(mech: Mechanism, tau: int) -> None:
    """E[Z·1(Z ≥ τ)], the empty cells' expected excess in a listed sum, against 400,000 draws (5 standard errors)."""
    z = mech(np.zeros(400_000, dtype=np.int64), rng=noise.seeded_rng(11))
    part = np.where(z >= tau, z, 0).astype(float)
    assert abs(part.mean() - mech.upper_tail_mean(tau)) < 5 * part.std() / np.sqrt(len(part)) + 1e-12


def test_histogram_row_total_is_one_rule_for_dense_and_sparse_domains() -> None:
    """The row count's source has the smallest expected error of three, from public inputs only: the domain's
    size alone (dense or sparse) does not switch it."""
    from dpsynth.histogram import MAX_DENSE_CELLS
    from dpsynth.plan import histogram_row_total

    lap = DiscreteLaplace.calibrate(1.0, "add-remove")
    count_sd = DiscreteLaplace.calibrate(0.01, "add-remove").noise_std()  # about 141 rows
    for n_cells in (MAX_DENSE_CELLS - 1, MAX_DENSE_CELLS + 1):
        assert histogram_row_total(n_cells, lap, 1, count_sd) == "count"  # the sums' errors are thousands of rows
        assert histogram_row_total(n_cells, lap, 40, count_sd) == "count"
        assert histogram_row_total(n_cells, lap, 1) == "unclamped"  # without a count: ~0.43 extra rows per empty cell
    assert histogram_row_total(100, lap, 1, count_sd) == "unclamped"  # spread 14 rows
    assert histogram_row_total(100, lap, 8, count_sd) == "unclamped"  # a threshold never selects the listed sum
    assert histogram_row_total(4, lap, 1, count_sd) == "listed"


def test_a_forced_histogram_of_a_huge_domain_has_about_n_rows() -> None:
    """Threshold 1 on 10.6 million cells: the synthetic row count is a noisy count of its own (1% of ε),
    not the hundreds of thousands of cells that noise alone lists nor the unclamped sum's √N·sd; the
    card lists the count as a stage, and the stages' ε add up to the release's."""
    from dpsynth import release
    from dpsynth.plan import HISTOGRAM_ROWS_SHARE

    cats = [f"c{i}" for i in range(26)]
    schema = Schema([CategoricalColumn(name=f"x{j}", categories=tuple(cats)) for j in range(5)]
                    + [CategoricalColumn(name="y", categories=("a", "b", "c", "d", "e", "f"))])
    assert schema.n_cells > 10_000_000
    rng = np.random.default_rng(0)
    df = pd.DataFrame({**{f"x{j}": rng.choice(cats[:4], 3000) for j in range(5)}, "y": rng.choice(["a", "b"], 3000)})
    rel = release(df, schema, epsilon=4.0, method="histogram", rng=noise.seeded_rng(5))
    assert rel.plan.representation == "sparse" and rel.plan.row_total == "count"
    counter = rel.plan.histogram_rows_mechanism()
    assert counter.epsilon == pytest.approx(4.0 * HISTOGRAM_ROWS_SHARE)
    assert len(rel.sparse.cells) > 100_000  # noise lists many empty cells at τ = 1 ...
    assert abs(rel.rows - 3000) < 6 * counter.noise_std()  # ... the rows follow the data's size
    assert rel.card["released_tables"]["noisy_row_count"] == rel.rows
    assert rel.card["post_processing"]["synthetic_rows_source"].startswith("a noisy count of the rows")
    stages = rel.card["privacy"]["stages"]
    assert stages[0]["stage"].startswith("noisy row count") and stages[0]["epsilon"] == counter.epsilon
    assert sum(st["epsilon"] for st in stages) <= 4.0
    assert rel.plan.budget.epsilon_main + counter.epsilon <= 4.0


@pytest.mark.parametrize("delta", [0.0, 1e-9])
def test_the_histogram_rows_count_is_charged_once_and_composes(delta: float) -> None:
    """With numeric columns (a value model) and δ = 0 or δ > 0 (zCDP), the count's ε and the rest compose
    to the release's (ε, δ); the ledger's charge is the release's."""
    from dpsynth import release

    cats = tuple(f"c{i}" for i in range(10))  # 100,000 cells: the unclamped sum's spread is several hundred rows
    schema = Schema([CategoricalColumn(name=f"x{j}", categories=cats) for j in range(4)]
                    + [NumericColumn(name="v", lower=0, upper=100, bins=10)])
    rng = np.random.default_rng(1)
    df = pd.DataFrame({**{f"x{j}": rng.choice(cats[:3], 2000) for j in range(4)},
                       "v": rng.integers(0, 100, 2000).astype(str)})
    rel = release(df, schema, epsilon=1.0, delta=delta, method="histogram", threshold=3, rng=noise.seeded_rng(2))
    b = rel.plan.budget
    assert rel.plan.row_total == "count" and b.epsilon_rows > 0 and b.has_values
    text = rel.card["privacy"]["composition"]
    assert "row count" in text
    if delta > 0:
        from dpsynth import zcdp

        assert b.composition == "zcdp"
        assert zcdp.epsilon_from_rho(b.rho_total, delta) + b.epsilon_rows <= 1.0 + 1e-12
    else:
        assert b.epsilon_main + b.epsilon_values + b.epsilon_rows <= 1.0
    assert abs(rel.rows - 2000) < 6 * rel.plan.histogram_rows_mechanism().noise_std()
    # the curator's own number of rows: no count is bought, the whole ε goes to the cells
    fixed = release(df, schema, epsilon=1.0, delta=delta, method="histogram", threshold=3, rows=500,
                    rng=noise.seeded_rng(2))
    assert fixed.plan.row_total == "unclamped" and fixed.plan.budget.epsilon_rows == 0 and fixed.rows == 500
    assert not fixed.card["privacy"]["stages"][0]["stage"].startswith("noisy row count")

