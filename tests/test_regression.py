"""DP linear regression by noisy sufficient statistics (Kifer's notes): accuracy, noise law, ledger order, CLI."""

from __future__ import annotations

import itertools
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpsynth import regression
from dpsynth.accounting import Ledger, PrivacyBudget
from dpsynth.cli import main
from dpsynth.errors import BudgetExceededError, InputError
from dpsynth.neighbours import moment_matrix_sensitivity
from dpsynth.regression import GRID, dp_linear_regression, plan_regression
from dpsynth.schema import CategoricalColumn, NumericColumn, Schema

TRUE = np.array([3.0, 2.0, -1.5])


def schema_() -> Schema:
    return Schema((
        NumericColumn(name="x1", lower=0, upper=10, bins=5),
        NumericColumn(name="x2", lower=-5, upper=5, bins=5),
        NumericColumn(name="y", lower=-30, upper=40, bins=5),
        CategoricalColumn(name="colour", categories=("red", "blue")),
    ))


def data(n: int, seed: int, noise_sd: float = 2.0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x1, x2 = rng.uniform(0, 10, n), rng.uniform(-5, 5, n)
    y = TRUE[0] + TRUE[1] * x1 + TRUE[2] * x2 + rng.normal(0, noise_sd, n)
    return pd.DataFrame({"x1": x1, "x2": x2, "y": y, "colour": rng.choice(["red", "blue"], n),
                         "pid": rng.integers(0, n // 3, n)})


def exact_moments(df: pd.DataFrame) -> np.ndarray:
    cols = [schema_().column(c) for c in ("x1", "x2", "y")]
    grid, _ = regression._to_grid(df[["x1", "x2", "y"]], cols, "error")
    return regression._moment_matrix(grid)


# ---------------------------------------------------------------- accuracy and intervals
def test_large_epsilon_approaches_ols() -> None:
    df = data(3000, 1)
    ols = np.linalg.lstsq(np.column_stack([np.ones(len(df)), df.x1, df.x2]), df.y, rcond=None)[0]
    res = dp_linear_regression(df, schema_(), y="y", x=["x1", "x2"], epsilon=1e5, seed=1)
    # left: the fixed-point grid (1/4096 of each half-range) and noise of sd ≈ 2e-4 on moments of order n
    np.testing.assert_allclose(res.coefficients, ols, rtol=2e-3, atol=2e-3)
    assert res.terms == ["intercept", "x1", "x2"] and res.ridge == 0.0
    assert np.all(res.low <= res.coefficients) and np.all(res.coefficients <= res.high)
    assert abs(res.noisy_n - 3000) < 1 and res.residual_sd == pytest.approx(2.0, rel=0.05)


def test_intervals_cover_the_true_coefficients() -> None:
    """80 independent datasets and releases at ε = 1, n = 1000: 95% intervals cover ≥ 87% (3 sd below 0.95)."""
    hits = np.zeros(3)
    reps = 80
    for r in range(reps):
        res = dp_linear_regression(data(1000, 100 + r), schema_(), y="y", x=["x1", "x2"], epsilon=1.0, seed=r,
                                   bootstrap=500)
        hits += (res.low <= TRUE) & (TRUE <= res.high)
    assert np.all(hits / reps >= 0.87), hits / reps


def test_small_epsilon_adds_a_ridge_and_says_so() -> None:
    res = dp_linear_regression(data(100, 2), schema_(), y="y", x=["x1", "x2"], epsilon=0.05, seed=3)
    assert res.ridge > 0
    assert any("ridge" in w for w in res.card["warnings"])
    assert np.all(np.isfinite(res.coefficients)) and np.all(res.low < res.high)


# ---------------------------------------------------------------- the noise law
def test_laplace_noise_on_the_released_moments_has_the_stated_scale() -> None:
    df = data(300, 4)
    exact = exact_moments(df)
    iu = np.triu_indices(4)
    draws = []
    for seed in range(150):
        res = dp_linear_regression(df, schema_(), y="y", x=["x1", "x2"], epsilon=0.7, seed=seed, bootstrap=100)
        draws.append((np.array(res.card["released"]["noisy_moments"], dtype=np.int64) - exact)[iu])
    z = np.concatenate(draws).astype(np.float64)
    # Δ₁ = G²·D(D+1)/2 with D = 4 (intercept, x1, x2, y) under add-remove; scale Δ₁/ε
    scale = GRID**2 * 10 / 0.7
    assert Fraction(res.card["mechanism"]["scale"]) == pytest.approx(scale, rel=1e-9)
    assert res.card["sensitivity"]["l1"] == GRID**2 * 10
    assert stats.kstest(z, "laplace", args=(0, scale)).pvalue > 1e-4  # 1500 draws; discrete ≈ continuous at this scale
    assert np.mean(np.abs(z)) == pytest.approx(scale, rel=0.1)  # E|Z| = b; sd of the mean ≈ b/√1500 ≈ 2.6%


def test_gaussian_noise_on_the_released_moments_has_the_stated_sigma() -> None:
    df = data(300, 5)
    exact = exact_moments(df)
    iu = np.triu_indices(4)
    draws = []
    for seed in range(150):
        res = dp_linear_regression(df, schema_(), y="y", x=["x1", "x2"], epsilon=1.0, delta=1e-6, seed=seed,
                                   bootstrap=100)
        draws.append((np.array(res.card["released"]["noisy_moments"], dtype=np.int64) - exact)[iu])
    z = np.concatenate(draws).astype(np.float64)
    sigma = res.card["mechanism"]["sigma"]
    assert res.card["sensitivity"]["l2_squared"] == GRID**4 * 10
    assert stats.kstest(z, "norm", args=(0, sigma)).pvalue > 1e-4


# ---------------------------------------------------------------- sensitivities
def _brute_force(g: int, c: int, relation: str, may_drop: bool = False) -> tuple[int, int]:
    """Largest L1 and squared L2 change of triu(a·aᵀ) over every row (and pair of rows) on a grid of half-width g."""
    rows = [np.array((g, *v)) for v in itertools.product(range(-g, g + 1), repeat=c)]
    iu = np.triu_indices(c + 1)
    mats = [np.outer(r, r)[iu] for r in rows]
    zero = np.zeros_like(mats[0])
    if relation == "add-remove":
        changes = [m - zero for m in mats]
    else:
        changes = [m1 - m2 for m1 in mats for m2 in mats] + ([m - zero for m in mats] if may_drop else [])
    return max(int(np.abs(d).sum()) for d in changes), max(int((d * d).sum()) for d in changes)


@pytest.mark.parametrize("c", [1, 2])
def test_moment_sensitivity_bounds_every_change(c: int) -> None:
    g = 2
    l1, l2sq = moment_matrix_sensitivity("add-remove", c, g * g)
    assert (l1, l2sq) == _brute_force(g, c, "add-remove")  # tight: the row with every |a_j| = G
    for may_drop in (False, True):
        l1, l2sq = moment_matrix_sensitivity("replace-one", c, g * g, rows_may_drop=may_drop)
        b1, b2 = _brute_force(g, c, "replace-one", may_drop)
        assert b1 <= l1 and b2 <= l2sq


def test_moment_sensitivity_formulas_for_replace_one_and_k_rows() -> None:
    b = GRID * GRID
    # D = 4 (intercept + 3 columns): add-remove 10 entries of B; replace-one 3 diagonal B + 6 off-diagonal 2B
    assert moment_matrix_sensitivity("add-remove", 3, b) == (10 * b, 10 * b * b)
    assert moment_matrix_sensitivity("replace-one", 3, b) == (15 * b, (3 + 24) * b * b)
    assert moment_matrix_sensitivity("replace-one", 3, b, rows_may_drop=True) == (16 * b, 28 * b * b)
    assert moment_matrix_sensitivity("replace-one", 3, b, 4) == (4 * 15 * b, 16 * 27 * b * b)
    assert moment_matrix_sensitivity("add-remove", 3, b, 2) == (20 * b, 40 * b * b)
    with pytest.raises(InputError):
        moment_matrix_sensitivity("add-remove", 0, b)
    with pytest.raises(InputError):
        moment_matrix_sensitivity("add-remove", 3, b, 0)


def test_plan_uses_the_relation_and_the_unit() -> None:
    s = schema_()
    p = plan_regression(s, y="y", x=["x1", "x2"], epsilon=1.0, neighbours="replace-one", max_contributions=3)
    assert p.l1 == 3 * GRID**2 * (3 + 4 * 3)
    assert p.scale == pytest.approx(p.l1)
    res = dp_linear_regression(data(600, 6), s, y="y", x=["x1", "x2"], epsilon=1.0, neighbours="replace-one",
                               id_column="pid", max_contributions=3, seed=1)
    assert res.card["sensitivity"]["l1"] == p.l1
    assert res.card["privacy"]["unit_of_protection"]["max_rows_per_person"] == 3
    assert res.card["privacy"]["neighbours"] == "replace-one"


# ---------------------------------------------------------------- ledger order and refusals
def test_too_little_budget_refuses_before_anything_is_computed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    led = Ledger(tmp_path / "l.sqlite")
    led.register("ds", PrivacyBudget(0.5, 0.0))
    calls = []
    monkeypatch.setattr(regression, "_moment_matrix", lambda grid: calls.append(1))
    with pytest.raises(BudgetExceededError):
        dp_linear_regression(data(200, 7), schema_(), y="y", x=["x1"], epsilon=1.0, seed=1, ledger=led, dataset_id="ds")
    assert not calls
    assert led.spent("ds").epsilon == 0


def test_the_spend_is_recorded_before_the_moments_are_computed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    led = Ledger(tmp_path / "l.sqlite")
    seen = []
    real = regression._moment_matrix

    def spy(grid: np.ndarray) -> np.ndarray:
        seen.append(led.spent("ds").epsilon)
        return real(grid)

    monkeypatch.setattr(regression, "_moment_matrix", spy)
    dp_linear_regression(data(200, 8), schema_(), y="y", x=["x1"], epsilon=0.4, seed=1, ledger=led, dataset_id="ds",
                         budget=PrivacyBudget(1.0, 0.0))
    assert seen == [0.4]
    assert [s.mechanism for s in led.spends("ds")] == ["regression: discrete Laplace (geometric)"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"x": ["nope"]}, "not in the schema"),
    ({"x": ["colour"]}, "categorical"),
    ({"y": "x1", "x": ["x1"]}, "both the target"),
    ({"x": []}, "at least one feature"),
    ({"epsilon": 0.0}, "ε must be"),
    ({"epsilon": -1.0}, "ε must be"),
    ({"delta": 1.0}, "δ must be"),
    ({"mechanism": "gaussian"}, "needs δ > 0"),
    ({"nan_policy": "zero"}, "missing-value policy"),
    ({"level": 1.5}, "interval level"),
    ({"max_contributions": 2}, "ID column"),
    ({"epsilon": 1e-9}, "too small"),
    ({"id_column": "x1"}, "cannot also be"),
])
def test_refusals_spend_nothing(tmp_path: Path, kwargs: dict, message: str) -> None:
    led = Ledger(tmp_path / "l.sqlite")
    args = {"y": "y", "x": ["x1", "x2"], "epsilon": 1.0, "seed": 1, "ledger": led, "dataset_id": "ds",
            "budget": PrivacyBudget(5.0, 1e-6)} | kwargs
    with pytest.raises(InputError, match=message):
        dp_linear_regression(data(100, 9), schema_(), **args)
    assert led.total("ds") is None or led.spent("ds").epsilon == 0


def test_missing_and_bad_values(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "l.sqlite")
    df = data(100, 10)
    df.loc[7, "x2"] = np.nan
    with pytest.raises(InputError, match=r"'x2' has 1 empty value\(s\) \(first at row 8\)"):
        dp_linear_regression(df, schema_(), y="y", x=["x1", "x2"], epsilon=1.0, seed=1, ledger=led, dataset_id="ds")
    assert led.total("ds") is None
    res = dp_linear_regression(df, schema_(), y="y", x=["x1", "x2"], epsilon=1.0, seed=1, nan_policy="drop",
                               neighbours="replace-one")
    assert any("1 row(s) with a missing value were dropped" in n for n in res.notes)
    assert res.card["sensitivity"]["l1"] == GRID**2 * (3 + 12 + 1)  # the count entry is charged when rows may drop
    df = data(100, 11).astype({"x1": object})
    df.loc[3, "x1"] = "ten"
    with pytest.raises(InputError, match="row 4: 'ten'"):
        dp_linear_regression(df, schema_(), y="y", x=["x1", "x2"], epsilon=1.0, seed=1)
    with pytest.raises(InputError, match="no column"):
        dp_linear_regression(data(50, 12).drop(columns="x2"), schema_(), y="y", x=["x1", "x2"], epsilon=1.0, seed=1)


def test_values_outside_the_bounds_are_clamped_and_reported() -> None:
    df = data(500, 13)
    df.loc[:9, "x1"] = 1e6
    res = dp_linear_regression(df, schema_(), y="y", x=["x1", "x2"], epsilon=1e5, seed=1)
    assert any("10 value(s) of 'x1' were outside [0, 10]" in n for n in res.notes)
    assert not any("x1" in w for w in res.card["warnings"])  # notes are for the curator, not in the card
    assert json.dumps(res.card)  # the card is plain JSON
    assert res.card["released"]["noisy_n"] == pytest.approx(500, abs=1)


# ---------------------------------------------------------------- command line
@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path, Path]:
    d = tmp_path / "data.csv"
    data(800, 14).to_csv(d, index=False)
    s = tmp_path / "schema.json"
    s.write_text(schema_().to_json())
    assert main(["ledger", "init", "--ledger", str(tmp_path / "l.sqlite")]) == 0  # a named ledger is never made silently
    return tmp_path, d, s


def test_cli_regress_prints_json_writes_the_card_and_charges(files, capsys) -> None:
    tmp, d, s = files
    led = tmp / "l.sqlite"
    code = main(["regress", str(d), "--schema", str(s), "--y", "y", "--x", "x1,x2", "--epsilon", "2", "--ledger", str(led),
                 "--budget", "3", "--seed", "5", "--json", "--card-out", str(tmp / "card.json")])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out["coefficients"]) == ["intercept", "x1", "x2"]
    assert abs(out["coefficients"]["x1"] - 2.0) < 0.5
    lo, hi = out["intervals"]["x1"]
    assert lo < out["coefficients"]["x1"] < hi
    card = json.loads((tmp / "card.json").read_text())
    assert card["format"] == "dpsynth-regression-card/1" and card["privacy"]["epsilon"] == 2.0
    assert Ledger(led).datasets()[0]["spent_epsilon"] == 2.0
    # 2 of 3 spent: another 2 is refused with one line and exit 2
    assert main(["regress", str(d), "--schema", str(s), "--y", "y", "--x", "x1", "--epsilon", "2", "--ledger", str(led)]) == 2
    assert "exceeding the privacy budget" in capsys.readouterr().err
    assert main(["regress", str(d), "--schema", str(s), "--y", "y", "--x", "x1,x2", "--epsilon", "0.5", "--ledger",
                 str(led), "--seed", "1"]) == 0
    assert "intercept" in capsys.readouterr().out


@pytest.mark.parametrize(("extra", "message"), [
    (["--x", "nope"], "not in the schema"),
    (["--x", "colour"], "categorical"),
    (["--x", "x1", "--epsilon", "0"], "ε must be"),
    (["--x", "x1", "--y", "x1"], "both the target"),
])
def test_cli_regress_bad_input_exits_2_with_one_line(files, capsys, extra: list[str], message: str) -> None:
    tmp, d, s = files
    args = {"--y": "y", "--epsilon": "1"}
    for flag, value in zip(extra[::2], extra[1::2], strict=True):
        args[flag] = value
    argv = ["regress", str(d), "--schema", str(s), "--ledger", str(tmp / "l.sqlite")]
    argv += [t for kv in args.items() for t in kv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") <= 2 and "Traceback" not in err
    assert main(["regress", str(tmp / "missing.csv"), "--schema", str(s), "--y", "y", "--x", "x1", "--epsilon", "1",
                 "--ledger", str(tmp / "l.sqlite")]) == 2


def test_cli_regress_missing_values(files, capsys) -> None:
    tmp, d, s = files
    df = pd.read_csv(d)
    df.loc[2, "y"] = np.nan
    df.to_csv(d, index=False)
    base = ["regress", str(d), "--schema", str(s), "--y", "y", "--x", "x1", "--epsilon", "1", "--ledger", str(tmp / "l.sqlite")]
    assert main(base) == 2
    assert "row 3" in capsys.readouterr().err
    assert main(base + ["--nan-policy", "drop", "--seed", "2"]) == 0
    assert "dropped" in capsys.readouterr().err


@pytest.mark.parametrize("extra, message", [
    (["--card-out", "{tmp}/no/such/folder/card.json"], "does not exist"),
    (["--card-out", "{tmp}"], "is a folder"),
    (["--card-out", "{data}"], "would overwrite"),
    (["--level", "0.01"], "at least 0.5"),  # its interval left out its own coefficient
    (["--level", "1e-9"], "at least 0.5"),
])
def test_cli_regress_refuses_before_the_charge(files, capsys, extra: list[str], message: str) -> None:
    """An unwritable --card-out was found after ε was charged (the spend stood, no result was shown)."""
    tmp, d, s = files
    led = tmp / "l.sqlite"
    args = [e.format(tmp=tmp, data=d) for e in extra]
    before = d.read_bytes()
    assert main(["regress", str(d), "--schema", str(s), "--y", "y", "--x", "x1", "--epsilon", "1", "--ledger", str(led),
                 "--seed", "1", *args]) == 2
    assert message in capsys.readouterr().err
    assert not Ledger(led).datasets() or Ledger(led).datasets()[0]["spent_epsilon"] == 0
    assert d.read_bytes() == before


def test_cli_regress_labels_its_level_as_given(files, capsys) -> None:
    tmp, d, s = files
    assert main(["regress", str(d), "--schema", str(s), "--y", "y", "--x", "x1", "--epsilon", "1", "--ledger",
                 str(tmp / "l.sqlite"), "--seed", "1", "--level", "0.999"]) == 0
    assert "99.9% intervals" in capsys.readouterr().out


def test_drafted_bounds_are_refused_before_the_charge_unless_accepted(files, capsys) -> None:
    """Bounds read off the data are not private: refused like a release's (library and command line), charged
    nothing; accepted explicitly, the card says NOT PRIVATE. A drafted column the regression does not use is no bar."""
    tmp, d, s = files
    led = tmp / "l.sqlite"
    drafted = Schema(tuple(
        NumericColumn(name=c.name, lower=c.lower, upper=c.upper, bins=c.bins, provenance="data") if c.name == "x1" else c
        for c in schema_().columns))
    s.write_text(drafted.to_json())
    base = ["regress", str(d), "--schema", str(s), "--y", "y", "--x", "x1", "--epsilon", "1", "--ledger", str(led),
            "--seed", "1"]
    assert main(base) == 2
    err = capsys.readouterr().err
    assert "read off the data" in err and "x1" in err and "Traceback" not in err
    assert not Ledger(led).datasets() or Ledger(led).datasets()[0]["spent_epsilon"] == 0
    assert main(base + ["--accept-data-derived-schema", "--json", "--card-out", str(tmp / "c.json")]) == 0
    card = json.loads((tmp / "c.json").read_text())
    assert any(w.startswith("NOT PRIVATE") and "'x1'" in w for w in card["warnings"])
    assert main(base[:7] + ["x2"] + base[8:]) == 0  # x1 is not used: nothing drafted is published
    with pytest.raises(InputError, match="read off the data"):
        dp_linear_regression(data(100, 3), drafted, y="y", x=["x1"], epsilon=1.0, seed=1)
