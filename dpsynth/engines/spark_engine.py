"""Spark engine: count where the data lives, in a Spark cluster (tested in local mode).

The same SQL as the DuckDB engine (:mod:`dpsynth.engines.sql`, Spark dialect) runs as one
aggregation over a Spark DataFrame; only the groups (occupied cells × status flags) are
collected. Needs ``pyspark`` (``pip install pyspark``; Java 17) — not a runtime dependency of
dpsynth, since most curators never need it.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpsynth.binning import missing_columns_error
from dpsynth.engines import CellCounts, Engine, Progress, check_indexable
from dpsynth.engines import sql as S
from dpsynth.engines.sql import column_errors, report_from_statuses
from dpsynth.errors import InputError
from dpsynth.histogram import MAX_DENSE_CELLS
from dpsynth.io import MAX_CELL_CHARS, PARQUET_SUFFIXES
from dpsynth.schema import Schema


def _pyspark() -> Any:
    try:
        import pyspark.sql as pss
    except ImportError:
        raise InputError(
            "The Spark engine needs PySpark, which is not installed: run `pip install pyspark`"
            " (and install Java 17), or use --engine duckdb."
        ) from None
    return pss


class SparkEngine(Engine):
    """Counting with Spark SQL. Pass an existing ``spark`` session, or a ``master`` URL for a new one."""

    name = "spark"

    def __init__(self, *, spark: Any = None, master: str = "local[2]") -> None:
        self._spark = spark
        self.master = master

    @property
    def spark(self) -> Any:
        """The session (created on first use, with the UI off)."""
        if self._spark is None:
            pss = _pyspark()
            self._spark = (
                pss.SparkSession.builder.master(self.master).appName("dpsynth")
                .config("spark.ui.enabled", "false")
                .config("spark.sql.shuffle.partitions", "4")
                .config("spark.sql.execution.arrow.pyspark.enabled", "true")
                .getOrCreate()
            )
        return self._spark

    def read(self, source: Any) -> Any:
        """A Spark DataFrame from a path (CSV cells as text, Parquet typed), a pandas or a Spark DataFrame."""
        pss = _pyspark()
        if isinstance(source, pss.DataFrame):
            return source
        if isinstance(source, pd.DataFrame):
            return self.spark.createDataFrame(source.astype(object).where(source.notna(), None))
        if isinstance(source, str | Path):
            p = Path(source)
            if "*" not in p.name and not p.exists():
                raise InputError(f"File {str(source)!r} does not exist.")
            if p.is_dir() or p.suffix.lower() in PARQUET_SUFFIXES:
                from dpsynth.io import check_parquet_names

                check_parquet_names(p)
                return self.spark.read.parquet(str(p))
            return self._read_csv(p)
        raise InputError(f"The Spark engine counts a file or a DataFrame, not a {type(source).__name__}.")

    def _read_csv(self, p: Path) -> Any:
        """A CSV file with read_table's delimiter, exact column names, bytes checks and decimal commas (as the
        DuckDB engine reads it: :func:`dpsynth.engines.duckdb_engine.source_sql`)."""
        from dpsynth.engines.duckdb_engine import check_csv_bytes, csv_layout

        sep, header, encoding = csv_layout(p)
        check_csv_bytes(p)
        df = self.spark.read.csv(str(p), header=True, sep=sep, encoding=encoding.upper(), inferSchema=False,
                                 mode="FAILFAST", escape="\"", multiLine=True, ignoreLeadingWhiteSpace=False,
                                 ignoreTrailingWhiteSpace=False)
        if len(df.columns) != len(header):
            raise InputError(f"{p.name}: the header row could not be read consistently; check its quotes.")
        df = df.toDF(*header)
        if sep == ",":
            return df
        return df.selectExpr(*S.decimal_comma_columns(header, "spark"))

    def count(
        self, source: Any, schema: Schema, *, max_dense_cells: int = MAX_DENSE_CELLS,
        progress: Progress | None = None,
    ) -> CellCounts:
        """Exact counts of ``source`` in the cells of ``schema`` (see :mod:`dpsynth.engines`)."""
        check_indexable(schema)
        report = progress or (lambda _f, _m: None)
        report(0.0, "Counting rows into cells on Spark")
        df = self.read(source)
        types = dict(df.dtypes)
        _check_columns(schema, types)
        view = f"dpsynth_src_{uuid.uuid4().hex[:12]}"
        df.createOrReplaceTempView(view)
        # instants as text in UTC whatever the machine's time zone (binning.cell_text); the caller's setting is restored
        zone = self.spark.conf.get("spark.sql.session.timeZone")
        self.spark.conf.set("spark.sql.session.timeZone", "UTC")
        try:
            # every text column of a file, as read_table measures them all (a schema may leave some out)
            measured = [c for c, t in types.items() if t == "string"] if isinstance(source, str | Path) else []
            query, n_flags = S.count_sql(schema, types, view, "spark", measured=measured)
            try:
                res = self.spark.sql(query).toPandas()
            except Exception as exc:  # Py4J and Spark's own errors: a malformed CSV record under FAILFAST
                from dpsynth.engines.duckdb_engine import explain_csv_failure

                explain_csv_failure(source)  # read_table's message where it has one (a ragged row)
                first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
                label = Path(source).name if isinstance(source, str | Path) else "the table"
                raise InputError(f"{label} could not be read on Spark: {first}") from None
            cells = res["cell"].to_numpy(dtype=np.int64)
            counts = res["n"].to_numpy(dtype=np.int64)
            if isinstance(source, str | Path) and not counts.any():  # as dpsynth.io.read_table refuses it
                raise InputError(f"{Path(source).name} has a header but no data rows.")
            if measured and int(res["longest"].fillna(0).max()) > MAX_CELL_CHARS:
                S.refuse_long_cells(lambda q: next(iter(self.spark.sql(q).collect()), None), view, "spark",
                                    Path(source).name, measured, MAX_CELL_CHARS)
            flags = [res[f"f{k}"].to_numpy(dtype=np.int64) for k in range(n_flags)]
            errors = column_errors(schema, flags, counts)
            if errors:
                j = min(errors)
                col = schema.columns[j]
                status = S.first_error(col, errors[j])
                rows = [tuple(r) for r in self.spark.sql(S.error_rows_sql(schema, types, view, "spark", j, status)).collect()]
                values = []
                if status == S.UNKNOWN_ERROR:
                    values = [r[0] for r in self.spark.sql(S.error_values_sql(schema, types, view, "spark", j, status)).collect()]
                raise InputError(S.error_message(col, status, errors[j][status], rows, values))
        finally:
            self.spark.conf.set("spark.sql.session.timeZone", zone)
            self.spark.catalog.dropTempView(view)
        rep, dropped = report_from_statuses(schema, flags, counts)
        keep = ~dropped
        out = CellCounts.from_cell_index(cells[keep], schema, rep, weights=counts[keep], max_dense_cells=max_dense_cells)
        report(1.0, "Counted")
        return out


def _check_columns(schema: Schema, types: dict[str, str]) -> None:
    missing = [c.name for c in schema.columns if c.name not in types]
    if missing:
        raise InputError(missing_columns_error(missing, types))
    for c in schema.columns:
        if c.type == "numeric" and S.type_class(types[c.name]) == "bool":
            raise InputError(S.bool_error(c.name))
