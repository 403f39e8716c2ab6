"""``release()``: the one path from a table to a private release, shared by the UI, CLI and tests.

A release is a function of (data, schema, privacy parameters, generator)::

    table ─encode→ cell codes ─count→ exact counts ─[ledger.charge first]→ mechanism → noisy counts
                                                                            │
                                        post-processing (clamp, normalise, sample, decode)
                                                                            ▼
                                                  synthetic rows + noisy histogram + card

Only the mechanism's output leaves this module; what encoding observed about the data (clamped
values, dropped rows) is returned in ``Release.report`` for the curator and is not part of any
released artifact. Nothing in the card depends on the data: not n, not a hash, not min/max.
"""

from __future__ import annotations

import math
import platform
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import numpy as np
import pandas as pd

from dpsynth import noise
from dpsynth.accounting import Ledger, PrivacyBudget
from dpsynth.binning import EncodingReport, encode
from dpsynth.datasets import dataset_fingerprint, file_fingerprint
from dpsynth.errors import InputError
from dpsynth.histogram import MAX_DENSE_CELLS, check_domain, count_cells, histogram_frame
from dpsynth.mechanisms import Mechanism, calibrate, check_delta, check_epsilon
from dpsynth.neighbours import Neighbours
from dpsynth.schema import Schema
from dpsynth.synthesis import noisy_total, synthesize

Method = Literal["histogram", "marginals", "auto"]
Progress = Callable[[float, str], None]

#: A total budget given to a dataset the ledger has not seen, when the caller names none.
DEFAULT_TOTAL_BUDGET = PrivacyBudget(epsilon=4.0, delta=1e-6)


@dataclass(frozen=True)
class Release:
    """What a release produced. ``synthetic``, ``histogram``/``marginals`` and ``card`` are released;
    ``report`` is for the curator's eyes only."""

    synthetic: pd.DataFrame
    card: dict[str, Any]
    schema: Schema
    histogram: pd.DataFrame | None = None
    noisy_counts: np.ndarray | None = None
    model: Any = None
    report: EncodingReport = field(default_factory=EncodingReport)
    sparse: Any = None  # dpsynth.sparse.SparseNoisyHistogram for huge domains (release_from_source)
    values: Any = None  # dpsynth.value_model.ValueModel: released fine distributions of numeric columns

    @property
    def marginals(self) -> list[pd.DataFrame]:
        """The released noisy marginals of the marginals method (one table per measured set)."""
        if self.model is None:
            return []
        return model_marginal_frames(self.model, self.schema)

    def resample(self, rows: int, *, rng: np.random.Generator) -> pd.DataFrame:
        """New synthetic rows from the released histogram or model: post-processing, no new ε."""
        return resample(self, rows, rng=rng)


def release(
    df: pd.DataFrame,
    schema: Schema,
    *,
    epsilon: float,
    delta: float = 0.0,
    neighbours: Neighbours | str = Neighbours.ADD_REMOVE,
    mechanism: str = "auto",
    method: Method = "histogram",
    rows: int | None = None,
    rng: np.random.Generator | None = None,
    seed: int | None = None,
    ledger: Ledger | None = None,
    dataset_id: str | None = None,
    dataset_label: str = "",
    budget: PrivacyBudget | None = None,
    id_column: str | None = None,
    max_contributions: int = 1,
    expected_rows: int | None = None,
    purpose: str = "synthetic data release",
    created: str | None = None,
    progress: Progress | None = None,
    value_share: float | None = None,
) -> Release:
    """Release a noisy histogram (or noisy marginals) and synthetic rows sampled from it.

    Guarantee: the released artifacts are (ε, δ)-DP with respect to the chosen neighbouring
    relation and unit of protection (a row, or a person with at most ``max_contributions`` rows
    in ``id_column``). With ``delta == 0`` noise is discrete Laplace (ε-DP); with ``delta > 0``
    it is discrete Gaussian unless ``mechanism='laplace'``. If a ``ledger`` is given the spend is
    committed to it before any noise is drawn, and a spend over the dataset's budget is refused.

    ``rng`` defaults to a CSPRNG (:func:`dpsynth.noise.secure_rng`); ``seed`` makes the release
    reproducible and the card then says it is not for publication.

    ``value_share`` s (default :data:`dpsynth.value_model.DEFAULT_VALUE_SHARE` when the schema has
    numeric columns, else 0): ε_v = s·ε goes to a pure ε_v-DP value model of the numeric columns
    (:mod:`dpsynth.value_model`), from which numeric values are drawn inside their bins; the main
    method gets (ε − ε_v, δ). Basic composition: (ε, δ) in total. s = 0 draws values uniformly in bins.
    """
    report_progress = progress or (lambda _f, _m: None)
    eps, dlt = check_epsilon(epsilon), check_delta(delta)
    eps_main, eps_values = split_value_budget(eps, schema, value_share)
    rel = Neighbours.parse(neighbours)
    if rows is not None and (int(rows) != rows or rows < 0):
        raise InputError(f"The number of synthetic rows must be a whole number ≥ 0, got {rows!r}.")
    if rng is not None and seed is not None:
        raise InputError("Pass either a generator or a seed, not both.")
    if rng is None:
        rng = noise.seeded_rng(seed) if seed is not None else noise.secure_rng()
    secure = noise.is_secure(rng)
    if not isinstance(df, pd.DataFrame) or len(df.columns) == 0:
        raise InputError("The table has no columns.")

    report_progress(0.05, "Checking the data against the schema")
    data, unit = _bound_contributions(df, id_column, max_contributions, rng=rng)
    encoded = encode(data, schema)
    mech = calibrate(eps_main, dlt, rel, max_contributions, kind=mechanism)
    chosen, why = choose_method(schema, mech, method, expected_rows)
    if chosen == "histogram":
        check_domain(schema)  # refuse a domain too large to hold before anything is spent or allocated

    if ledger is not None:
        ds = dataset_id or dataset_fingerprint(df)
        ledger.register(ds, budget or DEFAULT_TOTAL_BUDGET, label=dataset_label)
        report_progress(0.15, "Recording the spend in the privacy ledger")
        what = f"{chosen}: {mech.describe()['mechanism']}" + (" + value model (hierarchical histograms)" if eps_values else "")
        ledger.charge(ds, PrivacyBudget(eps, dlt), mechanism=what, purpose=purpose)

    card = _card_base(schema, eps, dlt, rel, unit, secure, seed, created, dataset_label)
    card["method"] = {"name": chosen, "why": why}
    values = None
    if chosen == "histogram":
        report_progress(0.3, "Counting and adding noise to every cell")
        noisy = mech(count_cells(encoded.codes, schema), rng=rng)
        values = _fit_values(encoded.raw, schema, eps_main, eps_values, rel, max_contributions, rng, card, report_progress)
        m = noisy_total(noisy) if rows is None else int(rows)
        report_progress(0.6, "Sampling synthetic rows")
        synthetic = synthesize(noisy, schema, m, rng=rng, values=values)
        card["mechanism"] = mech.describe()
        card["post_processing"] = _post_processing(rows, m, values is not None)
        card["artifacts"] = ["synthetic.csv", "histogram.csv", "card.json", "card.md"] + _value_artifact(values)
        out = Release(synthetic=synthetic, card=card, schema=schema, histogram=histogram_frame(noisy, schema),
                      noisy_counts=noisy, report=encoded.report, values=values)
    else:
        from dpsynth.marginals import fit_marginal_model

        report_progress(0.2, "Selecting and measuring marginals")
        model = fit_marginal_model(
            encoded.codes, schema.sizes, epsilon=eps_main, delta=dlt, neighbours=rel,
            max_contributions=max_contributions, rng=rng,
            progress=lambda f, msg: report_progress(0.2 + 0.6 * f, msg),
        )
        values = _fit_values(encoded.raw, schema, eps_main, eps_values, rel, max_contributions, rng, card, report_progress)
        m = max(0, int(round(model.noisy_total))) if rows is None else int(rows)
        report_progress(0.85, "Sampling synthetic rows")
        synthetic = _decode_model_sample(model, schema, m, rng, values)
        card["mechanism"] = model.describe()
        card["post_processing"] = _post_processing(rows, m, values is not None)
        card["artifacts"] = ["synthetic.csv", "marginals.csv", "model.json", "card.json", "card.md"] + _value_artifact(values)
        out = Release(synthetic=synthetic, card=card, schema=schema, model=model, report=encoded.report, values=values)
    report_progress(1.0, "Done")
    return out


def choose_method(schema: Schema, mech: Mechanism, method: str, expected_rows: int | None) -> tuple[str, str]:
    """The method and the reason, decided from public inputs only (schema, ε, δ, a public size hint)."""
    n_cells = schema.n_cells
    if method == "histogram":
        return "histogram", "chosen by the curator"
    if method == "marginals":
        return "marginals", "chosen by the curator"
    if method != "auto":
        raise InputError(f"Unknown method {method!r}; use histogram, marginals or auto.")
    if n_cells > MAX_DENSE_CELLS:
        return "marginals", f"the full histogram has {n_cells:,} cells, more than fit in memory"
    hint = expected_rows if expected_rows else 10_000
    noise_mass = n_cells * mech.noise_std()
    if len(schema.columns) > 2 and noise_mass > 0.25 * hint:
        return "marginals", (
            f"noise on {n_cells:,} cells (about {noise_mass:,.0f} in total) would swamp a table of about"
            f" {hint:,} rows"
        )
    return "histogram", f"the full histogram ({n_cells:,} cells) is small enough for ε = {mech.epsilon:g}"


def resample(rel: Release, rows: int, *, rng: np.random.Generator) -> pd.DataFrame:
    """Synthetic rows from a release's noisy histogram or model (post-processing)."""
    if rel.sparse is not None:
        from dpsynth.sparse import synthesize_sparse

        return synthesize_sparse(rel.sparse, rel.schema, rows, rng=rng)
    if rel.noisy_counts is not None:
        return synthesize(rel.noisy_counts, rel.schema, rows, rng=rng, values=rel.values)
    if rel.model is not None:
        return _decode_model_sample(rel.model, rel.schema, rows, rng, rel.values)
    raise InputError("This release holds neither a histogram nor a model to sample from.")


def model_marginal_frames(model: Any, schema: Schema) -> list[pd.DataFrame]:
    """Each noisy marginal of a fitted model as a table of cell labels and ``count``."""
    frames = []
    for cols, counts in model.measurements:
        sub = schema.select([schema.columns[j].name for j in cols])
        frames.append(histogram_frame(np.asarray(counts).ravel(), sub))
    return frames


def _decode_model_sample(model: Any, schema: Schema, rows: int, rng: np.random.Generator,
                         values: Any = None) -> pd.DataFrame:
    from dpsynth.binning import decode

    return decode(model.sample(rows, rng=rng), schema, rng=rng, values=values)


def split_value_budget(epsilon: float, schema: Schema, value_share: float | None) -> tuple[float, float]:
    """(ε of the main method, ε_v of the value model) for a share s of ε (None: the default share).

    Both are rounded *down* to floats so that, as exact decimals, they never add up to more than ε
    (basic composition then gives at most ε). s must be in [0, 1); s = 0 (or no numeric column)
    gives (ε, 0).
    """
    from fractions import Fraction

    from dpsynth.mechanisms import exact_epsilon
    from dpsynth.value_model import DEFAULT_VALUE_SHARE, value_columns

    if value_share is None:
        value_share = DEFAULT_VALUE_SHARE if value_columns(schema) else 0.0
    try:
        share = float(value_share)
    except (TypeError, ValueError):
        raise InputError(f"The value-model share of ε must be a number, got {value_share!r}.") from None
    if not 0.0 <= share < 1.0:
        raise InputError(f"The value-model share of ε must be at least 0 and below 1, got {value_share!r}.")
    if share == 0.0 or not value_columns(schema):
        return epsilon, 0.0
    total = exact_epsilon(epsilon)
    ev = Fraction(repr(share)) * total

    def down(x: Fraction) -> float:
        f = float(x)
        return math.nextafter(f, 0.0) if Fraction(repr(f)) > x else f

    ev_f = down(ev)
    main = down(total - Fraction(repr(ev_f)))
    return main, ev_f


def _fit_values(
    data: dict[str, np.ndarray], schema: Schema, eps_main: float, eps_values: float, rel: Neighbours, k: int, rng: np.random.Generator,
    card: dict[str, Any], report_progress: Progress,
) -> Any:
    """Release the value model (ε_v, pure DP; after the ledger charge) and record its stage on the card."""
    if eps_values <= 0:
        return None
    from dpsynth.value_model import fit_value_model

    report_progress(0.55, "Measuring the fine distributions of numeric columns")
    values = fit_value_model(data, schema, epsilon=eps_values, neighbours=rel, max_contributions=k, rng=rng)
    eps, dlt = card["privacy"]["epsilon"], card["privacy"]["delta"]
    card["value_model"] = {"epsilon": eps_values, "share_of_epsilon": eps_values / eps, "stage": values.describe()}
    card["privacy"]["epsilon_main_method"] = eps_main
    card["privacy"]["epsilon_value_model"] = eps_values
    card["privacy"]["composition"] = (
        f"basic composition of two stages: the main method is (ε − ε_v = {eps_main:g}, δ = {dlt:g})-DP and"
        f" the value model of the numeric columns is ε_v = {eps_values:g}-DP (pure), so the release is (ε, δ) ="
        f" ({eps:g}, {dlt:g})-DP; within the main method the cells are disjoint (parallel composition), and"
        " everything after the noise is post-processing"
    )
    return values


def _value_artifact(values: Any) -> list[str]:
    return [] if values is None else ["value_model.json"]


def _bound_contributions(
    df: pd.DataFrame, id_column: str | None, k: int, *, rng: np.random.Generator
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Keep at most k uniformly chosen rows per ID (a stable transformation), so sensitivity scales with k."""
    if id_column is None:
        if k != 1:
            raise InputError("Several rows per person need an ID column to bound contributions.")
        return df, {"unit": "record", "description": "one row of the table"}
    if id_column not in df.columns:
        raise InputError(f"The ID column {id_column!r} is not in the table.")
    # the permutation's draws depend on n: take them from a child stream keyed by a fixed-size draw,
    # so the generator used afterwards (noise, synthetic rows) is in a state independent of n
    order = _child_rng(rng).permutation(len(df))
    shuffled = df.iloc[order]
    rank = shuffled.groupby(id_column, sort=False, dropna=False).cumcount().to_numpy()
    kept = shuffled[rank < k].drop(columns=[id_column])
    return kept, {
        "unit": "person",
        "id_column": id_column,
        "max_rows_per_person": k,
        "description": f"all rows sharing a value of {id_column!r} (at most {k} kept per person, chosen at random)",
    }


def _child_rng(rng: np.random.Generator) -> np.random.Generator:
    """An independent ChaCha20 generator keyed by 256 bits of ``rng`` (always the same number of draws)."""
    from randomgen import ChaCha

    return np.random.Generator(ChaCha(key=int.from_bytes(rng.bytes(32), "little"), rounds=20))


def _post_processing(rows: int | None, m: int, values: bool = False) -> dict[str, Any]:
    from dpsynth.synthesis import POST_PROCESSING_RANDOMNESS

    inside = ("values of numeric columns drawn inside each bin from the released value model (its fine"
              " distribution restricted to the bin; uniform on the bin's grid where it holds no mass)") if values else (
              "values drawn uniformly inside each numeric bin (on the grid of whole numbers or declared"
              " decimals where the schema has one)")
    return {
        "steps": ["negative noisy counts clamped to 0", "normalised to probabilities",
                  "cells sampled (multinomial) and put in random order",
                  inside,
                  "all of this drawn from a fast generator (SFC64) seeded by 256 bits of the release's generator:"
                  " independent of the data, so post-processing (no privacy cost)"],
        "randomness": POST_PROCESSING_RANDOMNESS,
        "synthetic_rows": m,
        "synthetic_rows_source": "the noisy total of the released counts" if rows is None else "set by the curator",
    }


def _card_base(
    schema: Schema, eps: float, dlt: float, rel: Neighbours, unit: dict[str, Any], secure: bool,
    seed: int | None, created: str | None, label: str,
) -> dict[str, Any]:
    warnings = []
    derived = schema.data_derived()
    if derived:
        warnings.append(
            "NOT PRIVATE: the bounds or categories of " + ", ".join(map(repr, derived)) +
            " were taken from the data without a DP mechanism; they can reveal individual values."
        )
    if not secure:
        warnings.append("Reproducible (seeded) noise: for tests and demonstrations only, NOT for publication.")
    return {
        "format": "dpsynth-release-card/1",
        "release_id": uuid.uuid4().hex if secure else f"seeded-{seed}",
        "created": created or datetime.now(UTC).isoformat(timespec="seconds"),
        "dataset": label,
        "privacy": {
            "epsilon": eps,
            "delta": dlt,
            "definition": "approximate (ε, δ)-DP" if dlt > 0 else "pure ε-DP",
            "neighbours": rel.value,
            "neighbours_meaning": rel.describe(),
            "unit_of_protection": unit,
            "composition": "the whole release costs (ε, δ): the cells are disjoint (parallel composition) and "
                           "everything after the noise is post-processing",
        },
        "randomness": {
            "source": "cryptographically secure (ChaCha20 keyed from OS entropy)" if secure
            else "seeded pseudo-random generator",
            "reproducible": not secure,
            "for_publication": secure,
        },
        "schema": schema.to_dict(),
        "unknown_category_policies": {
            c.name: c.on_unknown for c in schema.columns if getattr(c, "on_unknown", "error") != "error"
        },
        "warnings": warnings,
        "software": _versions(),
    }


def _versions() -> dict[str, str]:
    import scipy

    from dpsynth import __version__

    return {"dpsynth": __version__, "python": platform.python_version(), "numpy": np.__version__,
            "pandas": pd.__version__, "scipy": scipy.__version__}


def card_summary_line(card: dict[str, Any]) -> str:
    """One line: method, ε, δ, neighbours."""
    p = card["privacy"]
    d = f", δ = {p['delta']:g}" if p["delta"] else ""
    return f"{card['method']['name']} release, ε = {p['epsilon']:g}{d}, {p['neighbours']} neighbours"


_ = math


# ---- counting on an engine (DuckDB/Spark) straight from a file: dpsynth.engines, dpsynth.sparse ----


def release_from_source(
    source: Any,
    schema: Schema,
    *,
    epsilon: float,
    delta: float = 0.0,
    engine: str = "duckdb",
    engine_options: dict[str, Any] | None = None,
    neighbours: Neighbours | str = Neighbours.ADD_REMOVE,
    mechanism: str = "auto",
    rows: int | None = None,
    rng: np.random.Generator | None = None,
    seed: int | None = None,
    ledger: Ledger | None = None,
    dataset_id: str | None = None,
    dataset_label: str = "",
    budget: PrivacyBudget | None = None,
    expected_rows: int | None = None,
    purpose: str = "synthetic data release",
    created: str | None = None,
    progress: Progress | None = None,
    synthetic_path: str | Any = None,
    threshold: int = 1,
    sparse_method: str = "auto",
    method: Method = "histogram",
) -> Release:
    """Release a noisy full histogram (or noisy marginals) and synthetic rows, counting where the data is.

    Guarantee: as :func:`release` with ``method='histogram'`` and one row per person — every
    cell of the domain gets exact discrete noise; (ε, δ)-DP under the relation. Counting runs on
    ``engine`` (:mod:`dpsynth.engines`: pandas, duckdb, spark) straight from ``source`` (a
    CSV/Parquet path, or a table native to the engine); only the counts come back. A domain
    larger than :data:`MAX_DENSE_CELLS` takes the sparse exact path (:mod:`dpsynth.sparse`):
    the same released law, memory growing with occupied cells. ``threshold`` τ ≥ 1 reports cells
    whose noisy count is below τ as 0 (post-processing) before sampling.

    With ``synthetic_path`` the synthetic rows are streamed to that CSV (or Parquet) in chunks
    sampled, decoded and formatted on worker threads (:func:`dpsynth.engines.output.write_synthetic_csv`;
    never all cells at once) and ``Release.synthetic`` holds only the columns; without it,
    ``Release.synthetic`` holds the same rows the file would. The ledger id defaults to the SHA-256 of the file's bytes (a DataFrame: its
    :func:`dataset_fingerprint`), computed while the engine counts.

    ``method='marginals'`` fits :func:`dpsynth.marginals.fit_marginal_model` (same guarantee as in
    :func:`release`) from one engine scan: the occupied cells and their exact counts stand for the
    rows (weighted rows give every marginal of the table). ``'auto'`` means the histogram here:
    its sparse path already holds huge domains.
    """
    from dpsynth.engines import check_indexable, get_engine
    from dpsynth.engines.output import write_synthetic_csv
    from dpsynth.sparse import noise_sparse, sparse_histogram_frame
    from dpsynth.synthesis import RowSampler, post_processing_seed

    report_progress = progress or (lambda _f, _m: None)
    eps, dlt = check_epsilon(epsilon), check_delta(delta)
    rel = Neighbours.parse(neighbours)
    if rows is not None and (int(rows) != rows or rows < 0):
        raise InputError(f"The number of synthetic rows must be a whole number ≥ 0, got {rows!r}.")
    if int(threshold) != threshold or threshold < 1:
        raise InputError(f"The release threshold must be a whole number ≥ 1, got {threshold!r}.")
    if rng is not None and seed is not None:
        raise InputError("Pass either a generator or a seed, not both.")
    if rng is None:
        rng = noise.seeded_rng(seed) if seed is not None else noise.secure_rng()
    secure = noise.is_secure(rng)
    mech = calibrate(eps, dlt, rel, 1, kind=mechanism)
    counter = get_engine(engine, **(engine_options or {}))
    if method not in ("histogram", "marginals", "auto"):
        raise InputError(f"Unknown method {method!r}; use histogram, marginals or auto.")
    marginals = method == "marginals"
    if marginals and threshold != 1:
        raise InputError("A release threshold applies to the histogram method only.")
    if marginals:
        check_indexable(schema)  # the engine counts a flat cell index
    elif schema.n_cells > MAX_DENSE_CELLS:
        from dpsynth.sparse import check_feasible

        check_feasible(check_indexable(schema), mech, threshold, sparse_method)  # before any data is read

    ident: dict[str, str] = {}
    hasher = None
    if ledger is not None and dataset_id is None:
        import threading

        hasher = threading.Thread(target=lambda: ident.update(id=_source_id(source)), daemon=True)
        hasher.start()
    report_progress(0.02, f"Counting rows into cells ({counter.name})")
    counts = counter.count(source, schema, progress=lambda f, msg: report_progress(0.02 + 0.5 * f, msg))
    if ledger is not None:
        if hasher is not None:
            hasher.join()
        ds = dataset_id or ident.get("id")
        if not ds:
            raise InputError("Name the dataset (dataset_id) to record this release in the privacy ledger.")
        ledger.register(ds, budget or DEFAULT_TOTAL_BUDGET, label=dataset_label)
        report_progress(0.55, "Recording the spend in the privacy ledger")
        what = "marginals: junction-tree model" if marginals else f"histogram: {mech.describe()['mechanism']}"
        ledger.charge(ds, PrivacyBudget(eps, dlt), mechanism=what, purpose=purpose)

    unit = {"unit": "record", "description": "one row of the table"}
    card = _card_base(schema, eps, dlt, rel, unit, secure, seed, created, dataset_label)
    if marginals:
        return _marginals_from_counts(counts, schema, eps, dlt, rel, rows, rng, card, counter.name, synthetic_path,
                                      report_progress)
    card["method"] = {"name": "histogram", "why": f"counted on the {counter.name} engine"}
    card["engine"] = counter.name
    n_cells = schema.n_cells
    q = mech.tail(threshold) / 2.0  # P(Z ≥ τ) by symmetry of the noise: public
    hint = expected_rows if expected_rows else 10_000
    if n_cells * q > 0.25 * hint:
        card["warnings"].append(
            f"Mostly noise: about {n_cells * q:,.0f} of the {n_cells:,} cells will show a count of at least"
            f" {threshold} from noise alone, against about {hint:,} rows of data. Use fewer cells, a larger ε,"
            " or a higher threshold."
        )
    report_progress(0.6, "Adding noise to every cell")
    noisy_counts = None
    sp = None
    if not counts.is_sparse:
        noisy = mech(counts.dense, rng=rng)
        m = noisy_total(noisy) if rows is None else int(rows)
        kept = noisy if threshold == 1 else np.where(noisy >= threshold, noisy, 0)
        sampler = RowSampler.dense(kept, m, seed=post_processing_seed(rng))
        hist = histogram_frame(noisy, schema)
        noisy_counts = noisy
    else:
        occ, cnt = counts.occupied()
        sp = noise_sparse(occ, cnt, n_cells, mech, rng=rng, threshold=threshold, method=sparse_method)  # type: ignore[arg-type]
        # the unclamped total's noise grows like √cells; on a huge domain the released (listed) counts' sum is the usable size
        m = int(sp.values.sum()) if rows is None else int(rows)
        # same law as the dense path: rows i.i.d. from the listed (clamped) counts, uniform if none
        sampler = RowSampler.from_weights(sp.cells, sp.values, n_cells, m, seed=post_processing_seed(rng))
        hist = sparse_histogram_frame(sp, schema)
        card["sparse"] = sp.describe()
    report_progress(0.7, "Sampling synthetic rows")
    if synthetic_path is not None:
        write_synthetic_csv(sampler, schema, synthetic_path,
                            progress=lambda f, msg: report_progress(0.7 + 0.3 * f, msg))
        synthetic = pd.DataFrame({c.name: pd.Series(dtype="object") for c in schema.columns})
    else:
        synthetic = sampler.frame(schema)
    card["mechanism"] = mech.describe()
    card["post_processing"] = _post_processing(rows, m)
    if sp is not None and rows is None:
        card["post_processing"]["synthetic_rows_source"] = "the sum of the released (listed) counts"
    if threshold > 1:
        card["post_processing"]["steps"].insert(1, f"noisy counts below {threshold} set to 0")
    card["artifacts"] = ["synthetic.csv", "histogram.csv", "card.json", "card.md"]
    report_progress(1.0, "Done")
    return Release(synthetic=synthetic, card=card, schema=schema, histogram=hist, noisy_counts=noisy_counts,
                   report=counts.report, sparse=sp)


def _marginals_from_counts(
    counts: Any, schema: Schema, eps: float, dlt: float, rel: Neighbours, rows: int | None, rng: np.random.Generator,
    card: dict[str, Any], engine: str, synthetic_path: Any, report_progress: Progress,
) -> Release:
    """The marginals method on an engine's exact counts (called after the ledger charge)."""
    from dpsynth.engines.output import write_synthetic_csv
    from dpsynth.marginals import fit_marginal_model

    codes, weights = counts.occupied_codes()
    report_progress(0.6, "Selecting and measuring marginals")
    model = fit_marginal_model(codes, schema.sizes, epsilon=eps, delta=dlt, neighbours=rel, rng=rng, weights=weights,
                               progress=lambda f, msg: report_progress(0.6 + 0.2 * f, msg))
    m = max(0, int(round(model.noisy_total))) if rows is None else int(rows)
    card["method"] = {"name": "marginals", "why": f"chosen by the curator; counted on the {engine} engine"}
    card["engine"] = engine
    report_progress(0.8, "Sampling synthetic rows")
    if synthetic_path is not None:
        sample = model.sample(m, rng=rng)
        cells = np.ravel_multi_index(tuple(sample.T), schema.sizes) if m else np.zeros(0, dtype=np.int64)
        del sample
        write_synthetic_csv(cells, schema, synthetic_path, rng=rng,
                            progress=lambda f, msg: report_progress(0.8 + 0.2 * f, msg))
        synthetic = pd.DataFrame({c.name: pd.Series(dtype="object") for c in schema.columns})
    else:
        synthetic = _decode_model_sample(model, schema, m, rng)
    card["mechanism"] = model.describe()
    card["post_processing"] = _post_processing(rows, m)
    card["artifacts"] = ["synthetic.csv", "marginals.csv", "model.json", "card.json", "card.md"]
    report_progress(1.0, "Done")
    return Release(synthetic=synthetic, card=card, schema=schema, model=model, report=counts.report)


def _source_id(source: Any) -> str | None:
    """Ledger id of a source: SHA-256 of a file's bytes (files of a directory in name order), or the
    content fingerprint of a pandas DataFrame; ``None`` for other engine-native tables."""
    from pathlib import Path

    if isinstance(source, pd.DataFrame):
        return dataset_fingerprint(source)
    if not isinstance(source, str | Path):
        return None
    return file_fingerprint(Path(source))
