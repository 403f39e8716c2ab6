"""Command line: ``python -m dpsynth release|schema|ledger|resample|preview``.

A thin layer over the library. User errors (bad input, budget exceeded, ledger problems) exit
with status 2 and one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from dpsynth.accounting import default_ledger_path
from dpsynth.errors import DPSynthError, InputError

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
    r.add_argument("--out", required=True, help="synthetic CSV to write")
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

    ld = sub.add_parser("ledger", help="list datasets and spends")
    ld.add_argument("--ledger", default=None)
    ld.add_argument("--json", action="store_true")

    rs = sub.add_parser("resample", help="new synthetic rows from a released histogram (no new ε)")
    rs.add_argument("histogram", help="a release zip or folder; or its histogram CSV or model JSON (with --schema)")
    rs.add_argument("--schema", default=None)
    rs.add_argument("--rows", type=int, required=True)
    rs.add_argument("--out", required=True)
    rs.add_argument("--seed", type=int, default=None)

    pv = sub.add_parser("preview", help="expected error before spending budget (touches no data)")
    pv.add_argument("--schema", required=True)
    pv.add_argument("--epsilon", type=float, required=True)
    pv.add_argument("--delta", type=float, default=0.0)
    pv.add_argument("--neighbours", default="add-remove", choices=["add-remove", "replace-one"])
    pv.add_argument("--expected-rows", type=int, default=None)

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
    return p


def _regress(a: argparse.Namespace) -> int:
    from dpsynth.artifacts import card_json
    from dpsynth.io import read_table
    from dpsynth.pipeline import dataset_identity
    from dpsynth.regression import dp_linear_regression
    from dpsynth.schema import load_schema

    schema = load_schema(a.schema)
    df = read_table(a.input)
    ledger, budget = _ledger_and_budget(a)
    res = dp_linear_regression(
        df, schema, y=a.y, x=[c for c in a.x.split(",") if c.strip()], epsilon=a.epsilon, delta=a.delta,
        neighbours=a.neighbours, nan_policy=a.nan_policy, level=a.level, seed=a.seed, ledger=ledger, budget=budget,
        dataset_id=dataset_identity(a.input), dataset_label=Path(a.input).stem,
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
          f" ({a.neighbours}); {res.level:.0%} intervals:")
    for t, c, lo, hi in zip(res.terms, res.coefficients, res.low, res.high, strict=True):
        print(f"  {t:>20}  {c: .6g}  [{lo:.6g}, {hi:.6g}]")
    return 0


def _ledger_and_budget(a: argparse.Namespace) -> tuple[Ledger, PrivacyBudget | None]:
    """The ledger to charge (said aloud when new) and the total budget asked for a dataset new to it."""
    from dpsynth.accounting import Ledger, PrivacyBudget
    from dpsynth.release import DEFAULT_TOTAL_BUDGET

    ledger = Ledger(a.ledger or default_ledger_path())
    if ledger.created:
        print(f"Created a new privacy ledger at {ledger.path}.", file=sys.stderr)
    if a.budget is None and a.budget_delta is None:
        return ledger, None
    return ledger, PrivacyBudget(a.budget if a.budget is not None else DEFAULT_TOTAL_BUDGET.epsilon,
                                 a.budget_delta if a.budget_delta is not None else DEFAULT_TOTAL_BUDGET.delta)


def _release(a: argparse.Namespace) -> int:
    """``release``: the one pipeline (plan → check → charge → measure → write), counted on the chosen engine."""
    from dpsynth.engines import default_engine
    from dpsynth.pipeline import Outputs, run
    from dpsynth.plan import ReleaseRequest
    from dpsynth.release import card_summary_line
    from dpsynth.schema import load_schema

    # the engine is a counter only: the released bytes are the same whichever one runs
    engine = a.engine if a.engine != "auto" else default_engine(a.input)
    schema = load_schema(a.schema)
    request = ReleaseRequest(
        schema=schema, epsilon=a.epsilon, delta=a.delta, neighbours=a.neighbours, mechanism=a.mechanism,
        method=a.method, rows=a.rows, expected_rows=a.expected_rows, id_column=a.id_column,
        max_contributions=a.max_rows_per_person, threshold=a.threshold, accept_data_derived=a.accept_data_derived_schema,
    )
    outputs = Outputs(synthetic=a.out, card=a.card_out, tables=a.histogram_out, model=a.model_out, zip=a.zip_out)
    if not Path(a.input).exists():
        raise InputError(f"No such file: {a.input}")
    ledger, budget = _ledger_and_budget(a)
    rel = run(a.input, request, engine=engine, seed=a.seed, ledger=ledger, budget=budget,
              dataset_label=a.label or Path(a.input).stem, progress=_progress_bar(a), outputs=outputs)
    for msg in rel.report.messages():
        print(f"note (for you only, not released): {msg}", file=sys.stderr)
    for w in rel.card["warnings"]:
        print(f"warning: {w}", file=sys.stderr)
    print(f"{card_summary_line(rel.card)} (counted on the {engine} engine): wrote {rel.rows:,} synthetic rows to {a.out}")
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

    ledger = Ledger(a.ledger or default_ledger_path(), create=False)
    datasets = ledger.datasets()
    if a.json:
        print(json.dumps({"datasets": datasets, "spends": [s.__dict__ for s in ledger.spends()]}, indent=2))
        return 0
    if not datasets:
        print("The ledger has no datasets yet.")
    for d in datasets:
        print(f"{d['label']} [{d['dataset_id'][:12]}]: spent ε = {d['spent_epsilon']:g} of {d['total_epsilon']:g}"
              f" (δ {d['spent_delta']:g} of {d['total_delta']:g})")
        for s in ledger.spends(d["dataset_id"]):
            print(f"  {s.time}  ε = {s.epsilon:g}  δ = {s.delta:g}  {s.mechanism}  ({s.purpose})")
    return 0


def _resample(a: argparse.Namespace) -> int:
    """New synthetic rows from a release (zip or folder), or from its histogram CSV / model JSON and schema."""
    from dpsynth import noise
    from dpsynth.randomness import post_processing_seed
    from dpsynth.release import Release
    from dpsynth.results import result_from_files
    from dpsynth.schema import load_schema
    from dpsynth.writer import write_synthetic_csv

    src = Path(a.histogram)
    if not src.exists():
        raise InputError(f"No such file: {a.histogram}")
    rng = noise.seeded_rng(a.seed) if a.seed is not None else noise.secure_rng()
    if src.is_dir() or src.suffix.lower() == ".zip":
        rel = Release.load(src)
        schema, result = rel.schema, rel.result
    else:
        if a.schema is None:
            raise InputError("Give --schema with a histogram CSV or model JSON (a release zip carries its own).")
        schema = load_schema(a.schema)
        is_model = src.suffix.lower() == ".json"
        name = "model.json" if is_model else "histogram.csv"
        result = result_from_files({name: src.read_bytes()}, schema, {"method": {"name": "marginals" if is_model else "histogram"}})
    from dpsynth.synthesis import check_rows

    check_rows(a.rows)
    n = write_synthetic_csv(result.sampler(a.rows, post_processing_seed(rng)), schema, a.out)
    print(f"Wrote {n:,} rows re-sampled from the released histogram or model (no privacy budget used) to {a.out}")
    return 0


def _preview(a: argparse.Namespace) -> int:
    from dpsynth.schema import load_schema
    from dpsynth.utility import accuracy_preview

    schema = load_schema(a.schema)
    p = accuracy_preview(schema, a.epsilon, a.delta, a.neighbours, expected_rows=a.expected_rows)
    print(f"{p['n_cells']:,} cells, {p['mechanism']} noise with standard deviation {p['noise_std']:.2f} per cell.")
    print(f"95% of cells are within ±{p['interval_95']:g} of the truth; with 95% probability all are within ±{p['cell_bound']:g}.")
    for w in p["warnings"]:
        print(f"warning: {w}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    parser = _parser()
    a = parser.parse_args(argv)
    handlers = {"release": _release, "schema": _schema, "ledger": _ledger, "resample": _resample, "preview": _preview,
                "regress": _regress}
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
