"""Command line: ``python -m dpsynth release|schema|ledger|resample|preview|analyze``.

A thin layer over the library. User errors (bad input, budget exceeded, ledger problems) exit
with status 2 and one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    r.add_argument("--ledger", default=None, help=f"ledger file (default {default_ledger_path()})")
    r.add_argument("--budget", type=float, default=None, help="total ε for a dataset new to the ledger")
    r.add_argument("--budget-delta", type=float, default=None, help="total δ for a dataset new to the ledger")
    r.add_argument("--label", default="", help="a public name for the dataset")
    r.add_argument("--engine", default="auto", choices=["auto", "pandas", "duckdb", "spark"],
                   help="where to count: auto = duckdb for CSV/Parquet files over 50 MB, else pandas")
    r.add_argument("--threshold", type=int, default=1,
                   help="duckdb/spark: report noisy counts below this as 0 (post-processing; keeps huge domains sparse)")
    r.add_argument("--progress", action="store_true", help="show the progress bar even when stderr is not a terminal")

    s = sub.add_parser("schema", help="draft a schema from a file (NOT private: edit before use)")
    s.add_argument("input")
    s.add_argument("--out", required=True)
    s.add_argument("--bins", type=int, default=10)

    ld = sub.add_parser("ledger", help="list datasets and spends")
    ld.add_argument("--ledger", default=None)
    ld.add_argument("--json", action="store_true")

    rs = sub.add_parser("resample", help="new synthetic rows from a released histogram (no new ε)")
    rs.add_argument("histogram", help="histogram CSV, or model JSON of the marginals method, written by release")
    rs.add_argument("--schema", required=True)
    rs.add_argument("--rows", type=int, required=True)
    rs.add_argument("--out", required=True)
    rs.add_argument("--seed", type=int, default=None)

    pv = sub.add_parser("preview", help="expected error before spending budget (touches no data)")
    pv.add_argument("--schema", required=True)
    pv.add_argument("--epsilon", type=float, required=True)
    pv.add_argument("--delta", type=float, default=0.0)
    pv.add_argument("--neighbours", default="add-remove", choices=["add-remove", "replace-one"])
    pv.add_argument("--expected-rows", type=int, default=None)

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
    from dpsynth.engines import default_engine

    engine = a.engine if a.engine != "auto" else default_engine(a.input)
    if engine != "pandas":
        return _release_on_engine(a, engine)
    if a.threshold != 1:
        raise InputError("--threshold needs --engine duckdb or spark.")
    from dpsynth.datasets import file_fingerprint
    from dpsynth.io import read_table, to_safe_csv
    from dpsynth.release import card_summary_line, release
    from dpsynth.schema import load_schema

    schema = load_schema(a.schema)
    df = read_table(a.input)
    ledger, budget = _ledger_and_budget(a)
    rel = release(
        df, schema, epsilon=a.epsilon, delta=a.delta, neighbours=a.neighbours, mechanism=a.mechanism,
        method=a.method, rows=a.rows, seed=a.seed, ledger=ledger, budget=budget, id_column=a.id_column,
        max_contributions=a.max_rows_per_person, expected_rows=a.expected_rows,
        dataset_label=a.label or Path(a.input).name, dataset_id=file_fingerprint(a.input),
        progress=_progress_bar(a),
    )
    Path(a.out).write_bytes(to_safe_csv(rel.synthetic))
    _write_extras(a, rel)
    print(f"{card_summary_line(rel.card)}: wrote {len(rel.synthetic):,} synthetic rows to {a.out}")
    return 0


def _write_extras(a: argparse.Namespace, rel: Any) -> None:
    """The optional outputs of both release paths (histogram or marginals, model, card) and the curator's notes."""
    from dpsynth.artifacts import card_json, card_markdown, release_files
    from dpsynth.io import to_safe_csv

    if a.histogram_out:
        data = to_safe_csv(rel.histogram) if rel.histogram is not None else release_files(rel)["marginals.csv"]
        Path(a.histogram_out).write_bytes(data)
    if a.model_out and rel.model is not None:
        Path(a.model_out).write_text(json.dumps(rel.model.to_dict()), encoding="utf-8")
    if a.card_out:
        Path(a.card_out).write_text(card_json(rel.card), encoding="utf-8")
        Path(a.card_out).with_suffix(".md").write_text(card_markdown(rel.card), encoding="utf-8")
    for msg in rel.report.messages():
        print(f"note (for you only, not released): {msg}", file=sys.stderr)
    for w in rel.card["warnings"]:
        print(f"warning: {w}", file=sys.stderr)


def _progress_bar(a: argparse.Namespace):  # noqa: ANN202 - a callable (fraction, message)
    from dpsynth.engines.output import ProgressBar

    return ProgressBar(sys.stderr, force=a.progress)


def _release_on_engine(a: argparse.Namespace, engine: str) -> int:
    """``release`` counted on DuckDB/Spark straight from the file; rows streamed to --out."""
    from concurrent.futures import ThreadPoolExecutor

    from dpsynth.datasets import file_fingerprint

    # The ledger id (SHA-256 of the file) is hashed on the second core while the library loads
    # (hashlib releases the GIL), not while the engine counts on both cores.
    with ThreadPoolExecutor(1) as pool:
        ledger_id = pool.submit(file_fingerprint, a.input) if Path(a.input).exists() else None
        return _release_on_engine_with_id(a, engine, ledger_id.result if ledger_id else lambda: None)


def _release_on_engine_with_id(a: argparse.Namespace, engine: str, ledger_id: Callable[[], str | None]) -> int:
    from dpsynth.release import card_summary_line, release_from_source
    from dpsynth.schema import load_schema

    unsupported = [flag for flag, bad in (("--id-column", a.id_column is not None),
                                          ("--max-rows-per-person", a.max_rows_per_person != 1),
                                          ("--model-out without --method marginals", a.model_out is not None and a.method != "marginals"))
                   if bad]
    if unsupported:
        raise InputError(f"{', '.join(unsupported)} need(s) --engine pandas for now (the {engine} engine counts records, one per row).")
    schema = load_schema(a.schema)
    ledger, budget = _ledger_and_budget(a)
    rel = release_from_source(
        a.input, schema, engine=engine, epsilon=a.epsilon, delta=a.delta, neighbours=a.neighbours,
        mechanism=a.mechanism, rows=a.rows, seed=a.seed, ledger=ledger, budget=budget, expected_rows=a.expected_rows,
        dataset_label=a.label or Path(a.input).name, progress=_progress_bar(a), synthetic_path=a.out, threshold=a.threshold,
        dataset_id=ledger_id(), method="marginals" if a.method == "marginals" else "histogram",  # auto: the sparse path holds big domains
    )
    _write_extras(a, rel)
    rows = rel.card["post_processing"]["synthetic_rows"]
    print(f"{card_summary_line(rel.card)} ({engine} engine): wrote {rows:,} synthetic rows to {a.out}")
    return 0


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
    from dpsynth import noise
    from dpsynth.histogram import counts_from_frame
    from dpsynth.io import read_table, to_safe_csv
    from dpsynth.schema import load_schema
    from dpsynth.synthesis import synthesize

    schema = load_schema(a.schema)
    rng = noise.seeded_rng(a.seed) if a.seed is not None else noise.secure_rng()
    if Path(a.histogram).suffix.lower() == ".json":
        from dpsynth.binning import decode
        from dpsynth.marginals import MarginalModel

        try:
            model = MarginalModel.from_dict(json.loads(Path(a.histogram).read_text(encoding="utf-8")))
        except json.JSONDecodeError as exc:
            raise InputError(f"{a.histogram} is not valid JSON: {exc.msg}.") from None
        if tuple(model.sizes) != schema.sizes:
            raise InputError("The model does not match the schema (different columns or cells).")
        out = decode(model.sample(a.rows, rng=rng), schema, rng=rng)
    else:
        out = synthesize(counts_from_frame(read_table(a.histogram), schema), schema, a.rows, rng=rng)
    Path(a.out).write_bytes(to_safe_csv(out))
    print(f"Wrote {len(out):,} rows re-sampled from the released histogram or model (no privacy budget used) to {a.out}")
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
                "analyze": _analyze}
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
