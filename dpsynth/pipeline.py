"""The one release pipeline: *plan → check → charge → measure → write*, for every entry point.

The Python API (:func:`dpsynth.release.release`, :func:`dpsynth.release.release_from_source`),
the command line and the dashboard (uploads and server files) all call :func:`run`::

    plan     make_plan(request)                 public inputs only (dpsynth.plan)
    check    check_plan, Outputs.check          labels, row cap, domain, output folders writable
             count the rows into cells          the data against the schema, before any charge:
                                                bad values, unknown categories, missing columns
                                                are refused here (an engine is only a counter)
             dataset identity                   one budget per table, whatever its file form
    charge   ledger.charge (durable)            refused if over budget: nothing spent
    measure  the plan's mechanisms              exact discrete noise (dpsynth.mechanisms); an adaptive
                                                split (marginals, default value share) first releases a
                                                noisy row count and resolves the budget from it
    write    one writer for every path          card, tables, synthetic rows (dpsynth.writer)

The engine (pandas, DuckDB, Spark) counts and nothing more: for the same seed the released bytes
are identical whichever engine, interface or input format ran. After the charge only faults no
one could foresee (a full disk, a killed process) can fail, and the error says the spend stands.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpsynth import noise
from dpsynth.accounting import Ledger, PrivacyBudget
from dpsynth.binning import encode
from dpsynth.errors import DPSynthError, InputError
from dpsynth.io import PARQUET_SUFFIXES
from dpsynth.neighbours import bound_contributions
from dpsynth.plan import ReleasePlan, ReleaseRequest, check_plan, make_plan
from dpsynth.randomness import post_processing_seed

Progress = Callable[[float, str], None]

#: A total budget given to a dataset the ledger has not seen, when the caller names none.
DEFAULT_TOTAL_BUDGET = PrivacyBudget(epsilon=4.0, delta=1e-6)


class ReleaseWriteError(DPSynthError):
    """Writing a release's files failed after its spend was recorded (the spend stands)."""


@dataclass(frozen=True)
class Outputs:
    """Where a release's files go (all optional). Checked before the charge: folders exist and are writable."""

    synthetic: str | Path | None = None
    card: str | Path | None = None
    tables: str | Path | None = None
    model: str | Path | None = None
    zip: str | Path | None = None
    folder: str | Path | None = None

    def paths(self) -> dict[str, Path]:
        return {k: Path(v) for k, v in self.__dict__.items() if v is not None and k != "folder"}

    def check(self, reads: Sequence[Any] = ()) -> None:
        """Refuse, before any spend, an output in a missing or read-only folder, one that is a folder, two outputs
        that are one file (the card's summary is written beside it, as .md), an output that is one of the files
        ``reads`` (the data, the schema, the ledger: a release must not overwrite what it reads, least of all the
        real table or its budget's record), and a synthetic table whose name is neither .csv nor Parquet (it would
        be CSV text under, say, an .xlsx name)."""
        paths = self.paths()
        named = dict(paths)
        if "card" in paths:
            named["card summary (.md)"] = paths["card"].with_suffix(".md")
        kept = {os.path.realpath(p): str(p) for p in reads if isinstance(p, str | os.PathLike)}
        for what, p in named.items():
            if os.path.realpath(p) in kept:
                raise InputError(f"The {what} output {str(p)!r} would overwrite {kept[os.path.realpath(p)]!r}, which this"
                                 " release reads; give the output another name.")
        seen: dict[str, str] = {}
        for what, p in named.items():
            key = os.path.realpath(p)
            if key in seen:
                raise InputError(f"The {seen[key]} and {what} outputs are the same file {str(p)!r}; give each its own"
                                 " name (one would overwrite the other).")
            seen[key] = what
        for what, p in paths.items():
            if p.is_dir():
                raise InputError(f"The {what} output {str(p)!r} is a folder; give a file name.")
            parent = p.parent if str(p.parent) else Path(".")
            if not parent.is_dir():
                raise InputError(f"The folder of the {what} output {str(p)!r} does not exist; create it first.")
            if not os.access(parent, os.W_OK):
                raise InputError(f"The folder of the {what} output {str(p)!r} is not writable.")
        if "synthetic" in paths and paths["synthetic"].suffix.lower() not in {".csv", *PARQUET_SUFFIXES}:
            raise InputError(f"The synthetic output {str(paths['synthetic'])!r} must end in .csv or .parquet: the"
                             " synthetic table is written as CSV or Parquet, by its name.")
        if self.folder is not None:
            f = Path(self.folder)
            if f.exists() and not f.is_dir():
                raise InputError(f"The output folder {str(f)!r} is a file.")
            parent = f if f.exists() else f.parent
            if not parent.is_dir() or not os.access(parent, os.W_OK):
                raise InputError(f"The output folder {str(f)!r} cannot be created or written.")


def run(
    source: Any,
    request: ReleaseRequest,
    *,
    engine: str = "pandas",
    engine_options: dict[str, Any] | None = None,
    rng: np.random.Generator | None = None,
    seed: int | None = None,
    ledger: Ledger | None = None,
    dataset_id: str | None = None,
    dataset_label: str = "",
    budget: PrivacyBudget | None = None,
    purpose: str = "synthetic data release",
    created: str | None = None,
    progress: Progress | None = None,
    outputs: Outputs | None = None,
    on_charged: Callable[[str], None] | None = None,
    archive: Any = None,
) -> Any:
    """Run one release of ``source`` (a DataFrame or a CSV/Parquet/Excel path) and return its
    :class:`dpsynth.release.Release`.

    Guarantee: the released artifacts are (ε, δ)-DP with respect to the request's neighbouring
    relation and unit of protection (see the card's stages). If a ``ledger`` is given the spend is
    committed to it before any noise is drawn; a spend over the dataset's budget is refused with
    nothing spent. ``rng`` defaults to a CSPRNG; ``seed`` makes the release reproducible and the
    card then says it is not for publication.
    """
    from dpsynth.card import build_card
    from dpsynth.release import Release

    say = progress or (lambda _f, _m: None)
    # ---- plan and check: public inputs only, nothing read yet
    plan = make_plan(request)
    check_plan(plan)
    outputs = outputs or Outputs()
    outputs.check(reads=[source, *([ledger.path] if ledger is not None else [])])
    if outputs.model is not None and plan.method != "marginals":
        raise InputError(f"A model output applies to the marginals method; this release runs the {plan.method} method"
                         f" ({plan.why}), which has no model. Leave out the model output, or choose the marginals"
                         " method.")
    if rng is not None and seed is not None:
        raise InputError("Pass either a generator or a seed, not both.")
    if rng is None:
        rng = noise.seeded_rng(seed) if seed is not None else noise.secure_rng()
    secure = noise.is_secure(rng)
    if engine not in ("pandas", "duckdb", "spark"):
        raise InputError(f"Unknown engine {engine!r}; use pandas, duckdb or spark.")
    if engine != "pandas" and request.id_column is not None:
        raise InputError(f"Several rows per person (an ID column) need the in-memory engine for now; the {engine}"
                         " engine counts one row per record. Use the pandas engine (--engine pandas on the command line) on a table"
                         " that fits in memory.")

    # ---- count: the one step that reads the data (errors here cost nothing)
    say(0.02, "Checking the data against the schema and counting")
    with ThreadPoolExecutor(1) as pool:
        # the table's identity (its budget's key) is computed beside the count, on the other core
        ident = pool.submit(dataset_identity, source) if ledger is not None and dataset_id is None else None
        counted = _count(source, plan, engine, engine_options, rng, lambda f, m: say(0.02 + 0.4 * f, m))
        ds = dataset_id or (ident.result() if ident is not None else "")
    if ledger is not None and not ds:
        raise InputError("Name the dataset (dataset_id) to record this release in the privacy ledger.")
    release_id = uuid.uuid4().hex if secure else f"seeded-{seed if seed is not None else 'rng'}"

    # ---- charge: durable, before any noise; the archive's pending entry first, so a charged release
    # is always found there, complete or failed with the reason (dpsynth.archive)
    recording = (archive.recording(dataset_id=ds, label=dataset_label, epsilon=request.epsilon, delta=request.delta,
                                   method=plan.method) if archive is not None else contextlib.nullcontext(None))
    with recording as rec:
        estimates: dict[str, Any] | None = None
        if ledger is not None:
            ledger.register(ds, budget or DEFAULT_TOTAL_BUDGET, label=dataset_label)
            say(0.45, "Recording the spend in the privacy ledger")
            ledger.charge(ds, PrivacyBudget(request.epsilon, request.delta), mechanism=_ledger_mechanism(plan),
                          purpose=purpose)
            estimates = _estimate_spends(ledger, ds, request)
            if on_charged is not None:
                on_charged(ds)

        # ---- measure
        if plan.budget.adaptive:  # the value model's share of the budget follows a noisy row count, measured first
            plan = replace(plan, budget=plan.budget.resolve(_noisy_rows(counted, plan, rng), request.epsilon,
                                                            request.delta))
        values = None
        if plan.budget.has_values:
            from dpsynth.value_model import fit_value_model_from_counts

            say(0.5, "Measuring the fine distributions of numeric columns")
            values = fit_value_model_from_counts(counted.leaves, plan.schema, **plan.budget.value_budget(),
                                                 neighbours=request.neighbours,
                                                 max_contributions=request.max_contributions, rng=rng)
        say(0.52, "Adding noise" if plan.method == "histogram" else "Selecting and measuring marginals")
        result = _measure(counted, plan, rng, lambda f, m: say(0.52 + 0.33 * f, m), values)
        post_seed = post_processing_seed(rng)
        rows = plan.synthetic_rows(result)
        card = build_card(plan, result, rows=rows, post_seed=post_seed, secure=secure, seed=seed,
                          created=created if created is not None else (None if secure else "reproducible (seeded) release"),
                          label=dataset_label, release_id=rec.release_id if rec is not None and secure else release_id,
                          ledger_state=estimates, values=values)
        rel = Release(result=result, card=card, schema=plan.schema, rows=rows, post_seed=post_seed, plan=plan,
                      report=counted.report, values=values)

        # ---- write
        try:
            _write(rel, outputs, lambda f, m: say(0.85 + 0.15 * f, m))
        except (OSError, MemoryError) as exc:
            what = f"out of memory ({exc})" if isinstance(exc, MemoryError) or "alloc" in str(exc) else str(exc)
            if rec is not None:  # the release itself is kept: its tables, card and seed re-create every file
                rel.archive_id = rec.complete(_archive_files(rel, None)).release_id
            raise ReleaseWriteError(
                f"The release was made and its spend stays recorded in the ledger, but writing its files failed: {what}."
                " Nothing more will be spent to write them again: re-create them from the release archive"
                + (f" (python -m dpsynth archive get {rel.archive_id} --out DIR)." if rel.archive_id else ".")
            ) from exc
        if rec is not None:
            say(0.98, "Keeping the release in the archive")
            rel.archive_id = rec.complete(_archive_files(rel, outputs.paths().get("synthetic"))).release_id
    say(1.0, "Done")
    return rel


def _archive_files(rel: Any, synthetic_path: Path | None) -> dict[str, bytes | Path]:
    """What the archive keeps: every released table, the schema and the card (whose post-processing seed
    re-creates the synthetic rows byte for byte), and the synthetic file as written (or made in memory)."""
    from dpsynth.card import card_json, card_markdown

    files: dict[str, bytes | Path] = {**rel.table_files(), "schema.json": rel.schema.to_json().encode("utf-8"),
                                      "card.json": card_json(rel.card).encode("utf-8"),
                                      "card.md": card_markdown(rel.card).encode("utf-8")}
    if synthetic_path is not None and synthetic_path.suffix.lower() in ("", ".csv") and synthetic_path.exists():
        files["synthetic.csv"] = synthetic_path
    elif synthetic_path is None or synthetic_path.suffix.lower() in ("", ".csv"):
        files["synthetic.csv"] = rel.synthetic_bytes()
    else:  # Parquet written for the curator: the archive keeps the CSV form too (same rows)
        files["synthetic.csv"] = rel.synthetic_bytes()
    return {"synthetic.csv": files.pop("synthetic.csv"), **files}


def dataset_identity(source: Any) -> str:
    """The ledger's identity of a table (:func:`dpsynth.identity.table_identity`): the same for the same
    table whatever its row or column order, line endings or storage (CSV, Parquet, Excel, DataFrame)."""
    from dpsynth.identity import table_identity

    return table_identity(source)


@dataclass
class _Counted:
    """The exact counts of the data (never released): cells for a histogram, codes (+ weights) for a model."""

    report: Any
    counts: Any = None  # dpsynth.engines.CellCounts
    codes: np.ndarray | None = None
    weights: np.ndarray | None = None
    leaves: dict[str, Any] | None = None  # value model: dpsynth.value_model.ColumnCounts per numeric column


def _count(source: Any, plan: ReleasePlan, engine: str, options: dict[str, Any] | None, rng: np.random.Generator,
           say: Progress) -> _Counted:
    from dpsynth.engines import CellCounts, get_engine
    from dpsynth.histogram import MAX_DENSE_CELLS, cell_index

    r, schema = plan.request, plan.schema
    if engine == "pandas":
        df = _frame(source, options)
        if len(df.columns) == 0:
            raise InputError("The table has no columns.")
        data, _ = bound_contributions(df, r.id_column, r.max_contributions, rng=rng)
        say(0.3, "Mapping values to cells")
        enc = encode(data, schema)
        leaves = _leaf_counts_of(enc.raw, schema) if plan.budget.has_values else None
        if plan.method == "marginals":
            return _Counted(report=enc.report, codes=enc.codes, leaves=leaves)
        counts = CellCounts.from_cell_index(cell_index(enc.codes, schema.sizes), schema, enc.report,
                                            max_dense_cells=MAX_DENSE_CELLS)
        return _Counted(report=enc.report, counts=counts, leaves=leaves)
    if plan.method == "marginals":
        from dpsynth.engines import check_indexable

        check_indexable(schema)  # an engine counts a flat cell index
    counter = get_engine(engine, **(options or {}))
    counts = counter.count(source, schema, progress=say)
    leaves = _streamed_leaf_counts(source, schema) if plan.budget.has_values else None
    if plan.method == "marginals":
        codes, weights = counts.occupied_codes()
        return _Counted(report=counts.report, codes=codes, weights=weights, leaves=leaves)
    return _Counted(report=counts.report, counts=counts, leaves=leaves)


def _leaf_counts_of(raw: dict[str, np.ndarray], schema: Any) -> dict[str, Any]:
    """Exact counts of the value model per numeric column (:class:`dpsynth.value_model.ColumnCounts`; never released as such)."""
    from dpsynth.value_model import count_column, value_columns

    return {c.name: count_column(raw[c.name], c) for c in value_columns(schema)}


#: Rows per batch when the value model's leaves are counted beside an engine (memory stays bounded).
LEAF_BATCH_ROWS = 500_000


def _streamed_leaf_counts(source: Any, schema: Any) -> dict[str, Any]:
    """The same leaf counts as the in-memory path, for a file or table counted on DuckDB or Spark: the rows
    are read in batches (DuckDB, CSV cells as text as the engines read them) and each batch is encoded with
    the in-memory semantics, so the released value model is the same whichever engine counted."""
    import duckdb

    from dpsynth.value_model import count_column, value_columns

    numeric = value_columns(schema)
    totals: dict[str, Any] = {}
    con = duckdb.connect()
    try:
        cols = ", ".join('"' + c.replace('"', '""') + '"' for c in schema.names)
        if isinstance(source, pd.DataFrame):
            con.register("src", source)
            rel = con.sql(f"SELECT {cols} FROM src")
        elif isinstance(source, str | Path):
            from dpsynth.engines.duckdb_engine import source_sql

            rel = con.sql(f"SELECT {cols} FROM {source_sql(source)}")
        else:
            raise InputError("The value model of numeric columns needs a file or a DataFrame; set its share to 0"
                             " to release from this source.")
        from dpsynth.io import nullable_dtype

        reader = rel.fetch_record_batch(LEAF_BATCH_ROWS)
        for batch in reader:
            # typed as read_table types them: true/false with gaps read 'True' (unknown) here and 'true' there
            enc = encode(batch.to_pandas(types_mapper=nullable_dtype), schema)
            for c in numeric:
                counted = count_column(enc.raw[c.name], c)
                totals[c.name] = counted if c.name not in totals else totals[c.name] + counted
    finally:
        con.close()
    # a source with no rows: the counts of no values
    return {c.name: totals[c.name] if c.name in totals else count_column(np.empty(0), c) for c in numeric}


def _frame(source: Any, options: dict[str, Any] | None) -> pd.DataFrame:
    if isinstance(source, pd.DataFrame):
        return source
    if isinstance(source, str | Path):
        from dpsynth.io import Limits, read_table

        return read_table(source, limits=(options or {}).get("limits", Limits()))
    raise InputError(f"The in-memory engine releases a DataFrame or a file, not a {type(source).__name__}.")


def _noisy_rows(counted: _Counted, plan: ReleasePlan, rng: np.random.Generator) -> int:
    """The released noisy count of the rows (after contribution bounding): ``plan.budget.rho_rows``-zCDP."""
    n = int(np.sum(counted.weights)) if counted.weights is not None else len(counted.codes)
    return int(plan.row_count_mechanism()(np.array([n], dtype=np.int64), rng=rng)[0])


def _measure(counted: _Counted, plan: ReleasePlan, rng: np.random.Generator, say: Progress, values: Any = None) -> Any:
    """The main method's release; the marginals method also fits the one-ways of numeric columns to the
    value model's released bin counts (``values``, already released: post-processing)."""
    from dpsynth.results import MarginalResult, NoisyHistogram, SparseHistogram

    r, schema = plan.request, plan.schema
    if plan.method == "marginals":
        from dpsynth.marginals import fit_marginal_model
        from dpsynth.value_model import bin_count_observations

        observed = bin_count_observations(values, schema) if values is not None else None
        model = fit_marginal_model(counted.codes, schema.sizes, epsilon=plan.budget.epsilon_main, delta=r.delta,
                                   neighbours=r.neighbours, max_contributions=r.max_contributions, rng=rng,
                                   weights=counted.weights, progress=say, one_way_observations=observed)
        return MarginalResult(schema, model)
    mech = plan.mechanism
    assert mech is not None

    def rows_count() -> int | None:
        """The plan's own noisy row count (``budget.epsilon_rows``), drawn after the cells' noise."""
        if plan.budget.epsilon_rows <= 0:
            return None
        n = int(np.sum(counted.counts.occupied()[1]))
        return int(plan.histogram_rows_mechanism()(np.array([n], dtype=np.int64), rng=rng)[0])

    if plan.representation == "dense":
        noisy = mech(counted.counts.to_dense(), rng=rng)
        return NoisyHistogram(schema, noisy, threshold=r.threshold, counted_rows=rows_count())
    from dpsynth.sparse import noise_sparse

    occ, cnt = counted.counts.occupied()
    hist = noise_sparse(occ, cnt, schema.n_cells, mech, rng=rng, threshold=r.threshold, method=r.sparse_method)  # type: ignore[arg-type]
    return SparseHistogram(schema, hist, counted_rows=rows_count())


def _ledger_mechanism(plan: ReleasePlan) -> str:
    if plan.method == "histogram":
        assert plan.mechanism is not None
        main = f"histogram: {plan.mechanism.describe()['mechanism']}"
    else:
        main = "marginals: junction-tree model"
    return main + (" + value model (hierarchical histograms)" if plan.budget.has_values else "")


def _estimate_spends(ledger: Ledger, ds: str, request: ReleaseRequest) -> dict[str, Any]:
    """What the card states of the dataset's privacy loss: this release plus the private schema estimates."""
    spends = [s for s in ledger.spends(ds) if s.purpose.startswith("schema estimate")]
    eps = request.epsilon + sum(s.epsilon for s in spends)
    dlt = request.delta + sum(s.delta for s in spends)
    return {
        "schema_estimate_spends": [{"purpose": s.purpose, "epsilon": s.epsilon, "delta": s.delta} for s in spends],
        "with_schema_estimates": {"epsilon": eps, "delta": dlt},
    }


def _write(rel: Any, outputs: Outputs, say: Progress) -> None:
    from dpsynth.card import card_json, card_markdown

    paths = outputs.paths()
    if "synthetic" in paths:
        csv = paths["synthetic"].suffix.lower() not in PARQUET_SUFFIXES
        if csv and ("zip" in paths or outputs.folder is not None):
            # The zip or the folder holds these same bytes: draw the rows once, for both.
            say(0.0, "Writing the synthetic rows")
            _atomic_write(paths["synthetic"], rel.synthetic_bytes())
        else:
            rel.write_synthetic(paths["synthetic"], progress=say)
    if "tables" in paths:
        tables = rel.table_files()
        name = "histogram.csv" if "histogram.csv" in tables else "marginals.csv"
        _atomic_write(paths["tables"], tables[name])
    if "model" in paths and "model.json" in (files := rel.table_files()):
        _atomic_write(paths["model"], files["model.json"])
    if "card" in paths:
        _atomic_write(paths["card"], card_json(rel.card).encode("utf-8"))
        _atomic_write(paths["card"].with_suffix(".md"), card_markdown(rel.card).encode("utf-8"))
    if "zip" in paths:
        _atomic_write(paths["zip"], rel.zip())
    if outputs.folder is not None:
        rel.save(outputs.folder)


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
