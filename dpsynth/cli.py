"""Command line: ``python -m dpsynth release|schema|ledger|archive|resample|preview|regress|analyze``.

A thin layer over the library. User errors (bad input, budget exceeded, ledger problems) exit
with status 2 and one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpsynth import humanize
from dpsynth.accounting import default_ledger_path
from dpsynth.errors import DPSynthError, InputError, TooLargeForMemoryError

if TYPE_CHECKING:
    from dpsynth.accounting import Ledger, PrivacyBudget

# Each command imports what it needs when it runs: an engine release starts its count before
# pandas and the rest of the library are loaded.


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m dpsynth", description="Differentially private synthetic data.")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("release", help="release a noisy histogram and synthetic data")
    r.add_argument("input", help="CSV, Parquet or Excel file")
    r.add_argument("--schema", required=True, help="schema JSON (public bounds, bins, categories)")
    r.add_argument("--epsilon", type=float, required=True)
    r.add_argument("--delta", type=float, default=0.0)
    r.add_argument("--neighbours", default="add-remove", choices=["add-remove", "replace-one"])
    r.add_argument("--mechanism", default="auto", choices=["auto", "laplace", "gaussian"])
    r.add_argument("--method", default="auto", choices=["auto", "histogram", "marginals"])
    r.add_argument("--rows", type=int, default=None, help="synthetic rows (default: the noisy total)")
    r.add_argument("--expected-rows", type=int, default=None, help="public rough size of the table, for --method auto")
    r.add_argument("--id-column", default=None, help="column identifying a person (unit of protection)")
    r.add_argument("--max-rows-per-person", type=int, default=1)
    r.add_argument("--seed", type=int, default=None, help="reproducible noise: tests and demos only")
    r.add_argument("--out", required=True, help="synthetic table to write: .csv, or .parquet")
    r.add_argument("--histogram-out", default=None)
    r.add_argument("--card-out", default=None, help="release card JSON (a .md summary is written beside it)")
    r.add_argument("--model-out", default=None, help="marginals method: model JSON for re-sampling")
    r.add_argument("--zip-out", default=None, help="all released files in one zip (the dashboard's download)")
    r.add_argument("--accept-data-derived-schema", action="store_true",
                   help="release even though the schema holds values read from the data (NOT private; the card says so)")
    r.add_argument("--ledger", default=None, help=f"ledger file (default {default_ledger_path()})")
    r.add_argument("--budget", type=float, default=None, help="total ε for a dataset new to the ledger")
    r.add_argument("--budget-delta", type=float, default=None, help="total δ for a dataset new to the ledger")
    r.add_argument("--label", default="", help="a public name for the dataset")
    r.add_argument("--engine", default="auto", choices=["auto", "pandas", "duckdb", "spark"],
                   help="where to count (the output is the same): auto = duckdb for CSV/Parquet files over 50 MB, else pandas")
    r.add_argument("--threshold", type=int, default=1,
                   help="histogram: report noisy counts below this as 0 (post-processing; keeps huge domains sparse)")
    r.add_argument("--progress", action="store_true", help="show the progress bar even when stderr is not a terminal")

    s = sub.add_parser("schema", help="draft a schema from a file (NOT private: edit before use)")
    s.add_argument("input")
    s.add_argument("--out", required=True)
    s.add_argument("--bins", type=int, default=10)

    ld = sub.add_parser("ledger", help="list datasets, spends and budget changes; init; set-total")
    ld.add_argument("action", nargs="?", default="show", choices=["show", "init", "set-total"],
                    help="show (default); init: create a new empty ledger; set-total: change a dataset's total budget")
    ld.add_argument("--ledger", default=None)
    ld.add_argument("--json", action="store_true")
    ld.add_argument("--dataset", default=None, help="set-total: the dataset (fingerprint, or its start, or its label)")
    ld.add_argument("--epsilon", type=float, default=None, help="set-total: the new total ε (default: unchanged)")
    ld.add_argument("--delta", type=float, default=None, help="set-total: the new total δ (default: unchanged)")
    ld.add_argument("--reason", default=None, help="set-total: why (required; kept in the ledger)")

    ar = sub.add_parser("archive", help="releases kept beside the ledger: list, get")
    ar_sub = ar.add_subparsers(dest="archive_command", required=True)
    al = ar_sub.add_parser("list", help="one line per release: id, dataset, ε, δ, method, status, created")
    al.add_argument("--ledger", default=None)
    al.add_argument("--dataset", default=None, help="only this dataset (fingerprint)")
    al.add_argument("--json", action="store_true")
    ag = ar_sub.add_parser("get", help="write an archived release's files into a folder")
    ag.add_argument("release_id")
    ag.add_argument("--out", required=True, help="folder to write the files into")
    ag.add_argument("--ledger", default=None)
    ag.add_argument("--rows", type=int, default=None,
                    help="synthetic rows: the release's own file for its row count, else new rows re-sampled (no ε)")

    rs = sub.add_parser("resample", help="new synthetic rows from a released histogram (no new ε)")
    rs.add_argument("histogram", help="a release zip or folder; or its histogram CSV or model JSON (with --schema)")
    rs.add_argument("--schema", default=None)
    rs.add_argument("--rows", type=int, required=True)
    rs.add_argument("--out", required=True)
    rs.add_argument("--value-model", default=None,
                    help="with a histogram CSV or model JSON: the release's value_model.json, which numeric values are"
                         " drawn from inside their bins (a release zip or folder carries its own)")
    rs.add_argument("--seed", type=int, default=None, help="reproducible rows: tests and demos only")

    pv = sub.add_parser("preview", help="expected error before spending budget (touches no data)")
    pv.add_argument("--schema", required=True)
    pv.add_argument("--epsilon", type=float, required=True)
    pv.add_argument("--delta", type=float, default=0.0)
    pv.add_argument("--neighbours", default="add-remove", choices=["add-remove", "replace-one"])
    pv.add_argument("--expected-rows", type=int, default=None)
    pv.add_argument("--mechanism", default="auto", choices=["auto", "laplace", "gaussian"])
    pv.add_argument("--method", default="auto", choices=["auto", "histogram", "marginals"])
    pv.add_argument("--rows", type=int, default=None, help="synthetic rows, as the release's --rows")
    pv.add_argument("--threshold", type=int, default=1, help="as the release's --threshold")

    rg = sub.add_parser("regress", help="DP linear regression by noisy sufficient statistics (spends its own ε)")
    rg.add_argument("input", help="CSV, Parquet or Excel file")
    rg.add_argument("--schema", required=True, help="schema JSON: the public bounds of --y and every --x")
    rg.add_argument("--y", required=True, help="target column")
    rg.add_argument("--x", required=True, help="feature columns, comma-separated")
    rg.add_argument("--epsilon", type=float, required=True)
    rg.add_argument("--delta", type=float, default=0.0, help="> 0: discrete Gaussian noise")
    rg.add_argument("--neighbours", default="add-remove", choices=["add-remove", "replace-one"])
    rg.add_argument("--nan-policy", default="error", choices=["error", "drop"], help="rows with a missing value")
    rg.add_argument("--level", type=float, default=0.95, help="level of the intervals")
    rg.add_argument("--ledger", default=None, help=f"ledger file (default {default_ledger_path()})")
    rg.add_argument("--budget", type=float, default=None, help="total ε for a dataset new to the ledger")
    rg.add_argument("--budget-delta", type=float, default=None, help="total δ for a dataset new to the ledger")
    rg.add_argument("--seed", type=int, default=None, help="reproducible noise: tests and demos only")
    rg.add_argument("--json", action="store_true", help="print coefficients and intervals as JSON")
    rg.add_argument("--card-out", default=None, help="regression card JSON")
    rg.add_argument("--accept-data-derived-schema", action="store_true",
                    help="publish bounds read off the data (NOT private; the card says so)")

    an = sub.add_parser("analyze", help="honest statistics from a release zip: intervals and tests that account for"
                                         " the noise (no new ε)")
    an.add_argument("release", help="release zip (as the dashboard or release --zip-out writes it)")
    an.add_argument("statistic", choices=["mean", "total", "proportion", "independence", "regression"])
    an.add_argument("args", nargs="+", help="mean|total COL; proportion COL VALUE; independence COL_A COL_B;"
                                            " regression RESPONSE PREDICTOR…")
    an.add_argument("--level", type=float, default=0.95, help="confidence level of the intervals")
    an.add_argument("--simulations", type=int, default=None, help="simulated releases behind each interval or test")
    an.add_argument("--seed", type=int, default=None, help="reproducible simulations (the release is not touched)")
    an.add_argument("--json", action="store_true")
    return p


def _analyze(a: argparse.Namespace) -> int:
    import numpy as np

    from dpsynth.inference import analyse, load_release, summary_lines

    rel = load_release(a.release)
    result = analyse(rel, a.statistic, a.args, level=a.level, rng=np.random.default_rng(a.seed), n_sim=a.simulations)
    if a.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False))
    else:
        print("\n".join(summary_lines(result)))
    return 0


def _regress(a: argparse.Namespace) -> int:
    from dpsynth.artifacts import card_json
    from dpsynth.io import read_table
    from dpsynth.pipeline import Outputs, dataset_identity
    from dpsynth.regression import dp_linear_regression
    from dpsynth.schema import load_schema

    schema = load_schema(a.schema)
    if a.card_out:  # refused before the charge, as a release's outputs are
        Outputs(card=a.card_out).check(reads=[a.input, a.schema])
    df = read_table(a.input)
    ledger, budget = _ledger_and_budget(a)
    res = dp_linear_regression(
        df, schema, y=a.y, x=[c for c in a.x.split(",") if c.strip()], epsilon=a.epsilon, delta=a.delta,
        neighbours=a.neighbours, nan_policy=a.nan_policy, level=a.level, seed=a.seed, ledger=ledger, budget=budget,
        dataset_id=dataset_identity(a.input), dataset_label=Path(a.input).stem,
        accept_data_derived=a.accept_data_derived_schema,
    )
    if a.card_out:
        Path(a.card_out).write_text(card_json(res.card), encoding="utf-8")
    for msg in res.notes:
        print(f"note (for you only, not released): {msg}", file=sys.stderr)
    for w in res.card["warnings"]:
        print(f"warning: {w}", file=sys.stderr)
    if a.json:
        print(json.dumps(res.to_dict()))
        return 0
    print(f"{res.card['query']['model']}, ε = {a.epsilon:g}" + (f", δ = {a.delta:g}" if a.delta else "") +
          f" ({a.neighbours}); {humanize.level(res.level)} intervals:")
    for t, c, lo, hi in zip(res.terms, res.coefficients, res.low, res.high, strict=True):
        print(f"  {t:>20}  {c: .6g}  [{lo:.6g}, {hi:.6g}]")
    return 0


def _ledger_and_budget(a: argparse.Namespace) -> tuple[Ledger, PrivacyBudget | None]:
    """The ledger to charge (said aloud when new) and the total budget asked for a dataset new to it."""
    from dpsynth.accounting import PrivacyBudget
    from dpsynth.release import DEFAULT_TOTAL_BUDGET

    ledger = _open_ledger(a.ledger)
    if a.budget is None and a.budget_delta is None:
        return ledger, None
    return ledger, PrivacyBudget(a.budget if a.budget is not None else DEFAULT_TOTAL_BUDGET.epsilon,
                                 a.budget_delta if a.budget_delta is not None else DEFAULT_TOTAL_BUDGET.delta)


def _open_ledger(named: str | None) -> Ledger:
    """The ledger named by ``--ledger`` (never created here: a typo must not start an empty ledger), or
    the default one, created on first use with a message saying where."""
    from dpsynth.accounting import Ledger
    from dpsynth.errors import LedgerError

    if named:
        if not Path(named).exists():
            raise LedgerError(f"The privacy ledger {named!r} does not exist. Create it with"
                              f" `python -m dpsynth ledger init --ledger {named}`, or check the path.")
        return Ledger(named, create=False)
    ledger = Ledger(default_ledger_path())
    if ledger.created:
        print(f"First use: created the privacy ledger at {ledger.path} (set DPSYNTH_LEDGER to keep it"
              " elsewhere). It records every privacy spend; back it up, never delete it.", file=sys.stderr)
    return ledger


def _release(a: argparse.Namespace) -> int:
    """``release``: the one pipeline (plan → check → charge → measure → write), counted on the chosen engine."""
    from dpsynth.engines import default_engine
    from dpsynth.pipeline import Outputs, run
    from dpsynth.plan import ReleaseRequest
    from dpsynth.release import card_summary_line
    from dpsynth.schema import load_schema

    # the engine is a counter only: the released bytes are the same whichever one runs (several rows per person
    # are bounded in memory only, so an ID column keeps the automatic choice there whatever the file's size)
    engine = a.engine if a.engine != "auto" else "pandas" if a.id_column is not None else default_engine(a.input)
    schema = load_schema(a.schema)
    request = ReleaseRequest(
        schema=schema, epsilon=a.epsilon, delta=a.delta, neighbours=a.neighbours, mechanism=a.mechanism,
        method=a.method, rows=a.rows, expected_rows=a.expected_rows, id_column=a.id_column,
        max_contributions=a.max_rows_per_person, threshold=a.threshold, accept_data_derived=a.accept_data_derived_schema,
    )
    outputs = Outputs(synthetic=a.out, card=a.card_out, tables=a.histogram_out, model=a.model_out, zip=a.zip_out)
    if not Path(a.input).exists():
        raise InputError(f"No such file: {a.input}")
    outputs.check(reads=[a.input, a.schema])
    from dpsynth.archive import Archive

    ledger, budget = _ledger_and_budget(a)

    def release_on(engine: str) -> Any:
        return run(a.input, request, engine=engine, seed=a.seed, ledger=ledger, budget=budget,
                   dataset_label=a.label or Path(a.input).stem, progress=_progress_bar(a), outputs=outputs,
                   archive=Archive.for_ledger(ledger))

    try:
        rel = release_on(engine)
    except TooLargeForMemoryError as exc:  # refused while reading, before any charge
        if a.id_column is not None:  # the engines that scale count one row per record: not a way out here
            from dpsynth.io import DUCKDB_HINT, Limits

            lim = Limits()
            raise InputError(f"{str(exc).replace(DUCKDB_HINT, '.')} Several rows per person (--id-column) are"
                             " bounded in memory only for now, so the table must fit the in-memory limits"
                             f" ({lim.max_bytes >> 20} MB, {lim.max_rows:,} rows, {lim.max_decoded_bytes >> 20} MB of decoded"
                             " Parquet cells);"
                             " the DuckDB and Spark engines count one row per record. Release a random sample of"
                             " people (all the rows of each one drawn) that fits.") from None
        if a.engine != "auto" or engine != "pandas":
            raise
        print(f"note: {exc} Counting it on the DuckDB engine instead (the release is the same on every engine).",
              file=sys.stderr)
        engine = "duckdb"
        rel = release_on(engine)
    for msg in rel.report.messages():
        print(f"note (for you only, not released): {msg}", file=sys.stderr)
    for w in rel.card["warnings"]:
        print(f"warning: {w}", file=sys.stderr)
    print(f"{card_summary_line(rel.card)} (counted on the {engine} engine): wrote {rel.rows:,} synthetic rows to {a.out}")
    print(f"Archived as {rel.archive_id} (python -m dpsynth archive get {rel.archive_id} --out DIR)")
    return 0


def _progress_bar(a: argparse.Namespace):  # noqa: ANN202 - a callable (fraction, message)
    from dpsynth.progress import ProgressBar

    return ProgressBar(sys.stderr, force=a.progress)


def _schema(a: argparse.Namespace) -> int:
    from dpsynth.drafting import draft_schema
    from dpsynth.io import read_table

    df = read_table(a.input)
    schema, left_out = draft_schema(df, bins=a.bins)
    Path(a.out).write_text(schema.to_json(), encoding="utf-8")
    print(
        f"Wrote a draft schema to {a.out}. WARNING: its bounds and categories were read from the data"
        " and are NOT private; replace them with public values before releasing.", file=sys.stderr,
    )
    if left_out:
        print(f"Left out (too many distinct values or empty): {', '.join(left_out)}", file=sys.stderr)
    return 0


def _ledger(a: argparse.Namespace) -> int:
    from dpsynth.accounting import Ledger

    path = Path(a.ledger) if a.ledger else default_ledger_path()
    if a.action == "init":
        if path.exists():
            raise InputError(f"A file already exists at {str(path)!r}; a ledger is never overwritten.")
        Ledger(path, create=True)
        print(f"Created an empty privacy ledger at {path}.")
        return 0
    if not path.exists():
        from dpsynth.errors import LedgerError

        raise LedgerError(f"The privacy ledger {str(path)!r} does not exist (nothing has been released with it)."
                          f" Create it with `python -m dpsynth ledger init" + (f" --ledger {a.ledger}`." if a.ledger else "`."))
    ledger = Ledger(path, create=False)
    if a.action == "set-total":
        return _set_total(a, ledger)
    datasets = ledger.datasets()
    events = ledger.budget_events()
    if a.json:
        print(json.dumps({"datasets": datasets, "spends": [s.__dict__ for s in ledger.spends()],
                          "budget_events": [e.__dict__ for e in events]}, indent=2))
        return 0
    if not datasets:
        print("The ledger has no datasets yet.")
    for d in datasets:
        print(f"{d['label']} [{d['dataset_id'][:12]}]: spent ε = {d['spent_epsilon']:g} of {d['total_epsilon']:g}"
              f" (δ {d['spent_delta']:g} of {d['total_delta']:g}); left ε = {d['remaining_epsilon']:g},"
              f" δ = {d['remaining_delta']:g}")
        for e in events:
            if e.dataset_id == d["dataset_id"]:
                old = "—" if e.old_epsilon is None else f"ε = {e.old_epsilon:g}, δ = {e.old_delta:g}"
                print(f"  {e.time}  total {old} → ε = {e.new_epsilon:g}, δ = {e.new_delta:g}  ({e.reason})")
        for s in ledger.spends(d["dataset_id"]):
            rid = f"  release {s.release_id}" if s.release_id else ""
            print(f"  {s.time}  ε = {s.epsilon:g}  δ = {s.delta:g}  {s.mechanism}  ({s.purpose}){rid}")
    return 0


def _set_total(a: argparse.Namespace, ledger: Ledger) -> int:
    from dpsynth.accounting import PrivacyBudget

    if not a.dataset:
        raise InputError("Name the dataset: --dataset FINGERPRINT (or its first characters, or its label).")
    if not a.reason or not a.reason.strip():
        raise InputError("Say why the total changes: --reason \"...\" (required; kept in the ledger).")
    if a.epsilon is None and a.delta is None:
        raise InputError("Give the new total: --epsilon and/or --delta.")
    # the listing shows ids as `table:584b53`: its hex alone names the dataset too
    matches = [d for d in ledger.datasets() if d["dataset_id"].startswith(a.dataset) or d["label"] == a.dataset
               or d["dataset_id"].partition(":")[2].startswith(a.dataset)]
    if len(matches) != 1:
        raise InputError(f"{len(matches)} datasets match {a.dataset!r}; give more of the fingerprint"
                         " (`python -m dpsynth ledger` lists them).")
    d = matches[0]
    new = PrivacyBudget(a.epsilon if a.epsilon is not None else d["total_epsilon"],
                        a.delta if a.delta is not None else d["total_delta"])
    e = ledger.set_total(d["dataset_id"], new, reason=a.reason)
    print(f"{d['label']} [{d['dataset_id'][:12]}]: total ε = {e.old_epsilon:g}, δ = {e.old_delta:g}"
          f" → ε = {e.new_epsilon:g}, δ = {e.new_delta:g} ({e.reason})")
    return 0


def _archive(a: argparse.Namespace) -> int:
    from dpsynth.accounting import Ledger
    from dpsynth.archive import Archive, archive_path_for

    ledger_path = Path(a.ledger) if a.ledger else default_ledger_path()
    if a.ledger and not ledger_path.exists():
        from dpsynth.errors import LedgerError

        raise LedgerError(f"The privacy ledger {a.ledger!r} does not exist.")
    path = archive_path_for(ledger_path)
    if not (path / "index.sqlite").exists():
        if a.archive_command == "get":
            raise InputError(f"No release archive at {str(path)!r}; nothing has been archived there.")
        print("[]" if a.json else f"No releases archived yet (archive folder {path}).")
        return 0
    archive = Archive(path, ledger=Ledger(ledger_path, create=False) if ledger_path.exists() else None)
    if a.archive_command == "get":
        if a.rows is not None:  # refused before any file is written
            from dpsynth.synthesis import check_rows

            check_rows(a.rows)
        written = archive.export(a.release_id, a.out)
        print(f"Wrote {len(written)} files of release {a.release_id} to {a.out}: {', '.join(p.name for p in written)}")
        card = json.loads((Path(a.out) / "card.json").read_text(encoding="utf-8")) if (Path(a.out) / "card.json").exists() else {}
        if a.rows is not None and a.rows != card.get("post_processing", {}).get("synthetic_rows"):
            from dpsynth import noise
            from dpsynth.archive import resample_archived

            (Path(a.out) / "synthetic.csv").write_bytes(resample_archived(archive, a.release_id, a.rows,
                                                                          rng=noise.secure_rng()))
            print(f"synthetic.csv: {a.rows:,} new rows re-sampled from the released histogram or model (no privacy"
                  " budget used)")
        return 0
    entries = archive.list(a.dataset)
    if a.json:
        print(json.dumps([e.to_dict() for e in entries], indent=2, ensure_ascii=False))
        return 0
    if not entries:
        print(f"No releases archived yet (archive folder {path}).")
    for e in entries:
        why = f": {e.reason if len(e.reason) <= 160 else e.reason[:157] + '...'}" if e.status == "failed" else ""
        print(f"{e.release_id}  {e.label} [{e.dataset_id[:12]}]  ε = {e.epsilon:g}  δ = {e.delta:g}  {e.method}"
              f"  {e.status}{why}  {e.created}")
    return 0


def _resample(a: argparse.Namespace) -> int:
    """New synthetic rows from a release (zip or folder), or from its histogram CSV / model JSON and schema (and
    value model): the rows the release's own files describe, as :meth:`dpsynth.release.Release.resample` draws them."""
    import os

    from dpsynth import noise
    from dpsynth.pipeline import Outputs
    from dpsynth.randomness import post_processing_seed
    from dpsynth.release import Release
    from dpsynth.results import result_from_files
    from dpsynth.schema import load_schema
    from dpsynth.synthesis import check_rows
    from dpsynth.value_model import ValueModel, value_columns
    from dpsynth.writer import write_synthetic_csv

    src = Path(a.histogram)
    if not src.exists():
        raise InputError(f"No such file: {a.histogram}")
    check_rows(a.rows)
    Outputs(synthetic=a.out).check(reads=[src, *(p for p in (a.schema, a.value_model) if p is not None)])
    if src.is_dir() and os.path.commonpath([os.path.realpath(a.out), os.path.realpath(src)]) == os.path.realpath(src):
        raise InputError(f"The output {a.out!r} is inside the release folder {str(src)!r} the rows are drawn from; give"
                         " a name outside it (the release's files are never overwritten).")
    if src.is_dir() or src.suffix.lower() == ".zip":
        if a.value_model is not None:
            raise InputError("A release zip or folder carries its own value model; give --value-model only with a"
                             " histogram CSV or model JSON.")
        rel = Release.load(src)
        schema, result, values = rel.schema, rel.result, rel.values
    else:
        if a.schema is None:
            raise InputError("Give --schema with a histogram CSV or model JSON (a release zip carries its own).")
        schema = load_schema(a.schema)
        is_model = src.suffix.lower() == ".json"
        name = "model.json" if is_model else "histogram.csv"
        result = result_from_files({name: src.read_bytes()}, schema, {"method": {"name": "marginals" if is_model else "histogram"}})
        values = None
        if a.value_model is not None:
            values = ValueModel.from_bytes(Path(a.value_model).read_bytes(), a.value_model)
            values.check(schema)
    rng = noise.seeded_rng(a.seed) if a.seed is not None else noise.secure_rng()
    n = write_synthetic_csv(result.sampler(a.rows, post_processing_seed(rng)), schema, a.out, values=values)
    print(f"Wrote {n:,} rows re-sampled from the released histogram or model (no privacy budget used) to {a.out}")
    uniform = [c.name for c in value_columns(schema)] if values is None and a.value_model is None else []
    if uniform and not (src.is_dir() or src.suffix.lower() == ".zip"):
        print(f"Note: the values of {', '.join(map(repr, uniform))} were drawn uniformly inside their bins; give the"
              " release's value_model.json with --value-model (or the release zip) for the values it released.")
    return 0


def _preview(a: argparse.Namespace) -> int:
    from dpsynth.prediction import noise_sentence, predict_utility
    from dpsynth.schema import load_schema
    from dpsynth.utility import accuracy_preview
    from dpsynth.verdicts import utility_verdict

    schema = load_schema(a.schema)
    pred = predict_utility(schema, a.epsilon, a.delta, a.neighbours, mechanism=a.mechanism, method=a.method,
                           expected_rows=a.expected_rows, rows=a.rows, threshold=a.threshold)
    print(f"Method: {pred.method} ({pred.why}).")
    if pred.method == "histogram":  # the per-cell figures describe the full histogram only
        p = accuracy_preview(schema, a.epsilon, a.delta, a.neighbours, a.mechanism, expected_rows=a.expected_rows,
                             rows=a.rows, threshold=a.threshold)
        print(f"{p['n_cells']:,} cells, {p['mechanism']} noise with standard deviation {p['noise_std']:.2f} per cell.")
        print(f"95% of cells are within ±{p['interval_95']:g} of the truth; with 95% probability all are within"
              f" ±{p['cell_bound']:g}.")
        for w in p["warnings"]:
            print(f"warning: {w}")
    else:
        print(noise_sentence(pred))
    print(pred.summary())
    verdict = utility_verdict(pred, schema)
    if not verdict.ok:
        print(f"warning: {verdict.message}")
        for advice in verdict.advice:
            print(f"  - {advice}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    parser = _parser()
    a = parser.parse_args(argv)
    handlers = {"release": _release, "schema": _schema, "ledger": _ledger, "archive": _archive, "resample": _resample,
                "preview": _preview, "regress": _regress, "analyze": _analyze}
    try:
        return handlers[a.command](a)
    except DPSynthError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except MemoryError as exc:  # numpy's and Arrow's allocation failures (e.g. under ulimit -v)
        print(f"error: out of memory ({' '.join(str(exc).split()) or 'no detail'}). Free memory or raise the limit,"
              " or ask for fewer synthetic rows (--rows); a spend already recorded in the ledger stays recorded.",
              file=sys.stderr)
        return 2
    except Exception as exc:
        pd = sys.modules.get("pandas")  # a parser error can only come from pandas once it is loaded
        if pd is not None and isinstance(exc, pd.errors.ParserError):
            print(f"error: {exc}", file=sys.stderr)
            return 2
        raise
    except InputError as exc:  # pragma: no cover - InputError is a DPSynthError; kept for clarity
        print(f"error: {exc}", file=sys.stderr)
        return 2
