"""The command line shared by the benchmarks that release every table of a folder (``bench_floor_ratio.py``,
``bench_ks_tables.py``, ``bench_independent.py``)."""

from __future__ import annotations

import argparse

from bench_paired import tables_in


def folder_parser(doc: str | None, eps: float) -> argparse.ArgumentParser:
    """--data, --tables, --eps (default ``eps``), --seeds, --set and --workers."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="folder of NAME.csv with NAME_schema.json")
    ap.add_argument("--tables", default="", help="comma-separated names (default: every table in --data)")
    ap.add_argument("--eps", type=float, default=eps)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--set", default="", help="module constants to override: 'pkg.mod.NAME=value;...'")
    ap.add_argument("--workers", type=int, default=2)
    return ap


def folder_tables(args: argparse.Namespace) -> list[str]:
    """The tables named by --tables, or every table in --data."""
    return [t for t in args.tables.split(",") if t] or tables_in(args.data)
