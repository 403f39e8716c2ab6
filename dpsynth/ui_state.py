"""The dashboard's one typed session state, and the schema editor's table ↔ :class:`Schema` mapping.

Everything a session of the dashboard remembers lives in one :class:`AppState` kept under a
single key of ``st.session_state`` (:func:`get_state` creates it in one place). Releases live
here, never in ``st.cache_data`` (which is shared by every user of a server): a release is drawn
once, behind the Release button, and every later rerun shows the same object.

The editor table is what ``st.data_editor`` shows on the Schema page: one row per column of
the data with ``include``, ``type``, ``lower``, ``upper``, ``bins``, ``integer``, ``categories``
(comma-separated), ``missing`` and ``source`` (where the values came from: public knowledge,
the data itself (NOT private), or a DP estimate charged to the budget). The functions here are
pure and tested without Streamlit; none of them does DP arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from dpsynth.accounting import Ledger, PrivacyBudget, default_ledger_path
from dpsynth.datasets import dataset_fingerprint, file_fingerprint
from dpsynth.drafting import draft_schema
from dpsynth.errors import DPSynthError, InputError
from dpsynth.release import DEFAULT_TOTAL_BUDGET, Release
from dpsynth.schema import CategoricalColumn, Column, NumericColumn, Schema

STATE_KEY = "dpsynth_state"

SOURCE_LABELS: dict[str, str] = {
    "public": "public",
    "data": "from data — NOT private",
    "private": "private estimate (charged)",
}
_LABEL_TO_SOURCE = {v: k for k, v in SOURCE_LABELS.items()}

TABLE_COLUMNS = ["include", "column", "type", "lower", "upper", "bins", "integer", "decimals", "categories", "missing",
                 "unknown", "source"]


@dataclass
class AppState:
    """Everything one dashboard session remembers (one object, initialised in :func:`get_state`)."""

    # --- data (private: only in this session)
    data: pd.DataFrame | None = None
    data_name: str = ""
    data_label: str = ""
    sample: str | None = None  # name of the bundled sample, if one is loaded
    upload_id: str | None = None  # the uploaded file last read, so reruns do not read it again
    dataset_id: str | None = None  # content fingerprint, the dataset's key in the ledger
    source_path: Path | None = None  # a large server file counted by DuckDB; ``data`` holds its first rows only
    load_error: str | None = None
    # --- schema (public)
    schema_table: pd.DataFrame | None = None
    editor_version: int = 0  # bumped when the table is replaced programmatically (fresh editor)
    left_out: list[str] = field(default_factory=list)
    # --- privacy choices (public)
    epsilon: float = 1.0
    delta: float = 1e-6
    mechanism: str = "laplace"  # laplace (δ = 0) or gaussian (δ > 0)
    neighbours: str = "add-remove"
    method: str = "auto"
    id_column: str | None = None
    max_contributions: int = 1
    expected_rows: int | None = None  # the curator's public guess, never read from the data
    total_epsilon: float = DEFAULT_TOTAL_BUDGET.epsilon
    total_delta: float = DEFAULT_TOTAL_BUDGET.delta
    demo_seed: int | None = None  # set only for a reproducible demonstration (not for publication)
    # --- release (drawn once, behind the button)
    release: Release | None = None
    release_error: str | None = None
    release_files: dict[str, bytes] = field(default_factory=dict)  # the release's downloads, built once
    release_zip: bytes = b""
    release_attempt: int = 0  # part of the Release button's key: a double click cannot release twice
    release_in_progress: bool = False
    release_messages: list[str] = field(default_factory=list)
    # --- curator-only analyses of the current release, kept so reruns do not recompute them
    analyses: dict[str, Any] = field(default_factory=dict)
    # --- a release zip uploaded on the Analyse page (public files; kept apart from this session's own release)
    uploaded_release: dict[str, Any] = field(default_factory=dict)
    ledger_path: Path = field(default_factory=default_ledger_path)

    # ------------------------------------------------------------ derived values
    @property
    def has_data(self) -> bool:
        """True once a table is loaded."""
        return self.data is not None

    def budget(self) -> PrivacyBudget:
        """The total budget this session would register for a new dataset."""
        return PrivacyBudget(self.total_epsilon, self.total_delta)

    def spend_delta(self) -> float:
        """δ of the next release: 0 for Laplace noise, the chosen δ for Gaussian noise."""
        return self.delta if self.mechanism == "gaussian" else 0.0

    def schema(self) -> tuple[Schema | None, list[str]]:
        """The schema from the editor table, or None with the problems found (one per column)."""
        if self.schema_table is None:
            return None, ["Load a dataset first (Data page)."]
        return table_to_schema(self.schema_table)

    def ledger(self) -> Ledger:
        """The privacy ledger (created on first use)."""
        return Ledger(self.ledger_path)

    # ------------------------------------------------------------ transitions
    def load(self, df: pd.DataFrame, name: str, *, label: str = "", sample: str | None = None,
             public_schema: Schema | None = None, upload_id: str | None = None,
             source: bytes | Path | str | None = None) -> None:
        """Take a new table: forget the old schema, release and analyses; draft or take the schema."""
        self.data = df
        self.source_path = None
        self.data_name = name
        self.data_label = label or name
        self.sample = sample
        self.upload_id = upload_id
        self.load_error = None
        # a file's budget is keyed by its bytes, as on the command line (dpsynth.datasets.file_fingerprint)
        self.dataset_id = file_fingerprint(source) if source is not None else dataset_fingerprint(df)
        if public_schema is not None:
            self.schema_table = schema_to_table(public_schema, list(map(str, df.columns)))
            self.left_out = [c for c in map(str, df.columns) if c not in public_schema.names]
        else:
            draft, left_out = draft_schema(df)
            self.schema_table = schema_to_table(draft, list(map(str, df.columns)))
            self.left_out = left_out
        self.editor_version += 1
        self.clear_release()

    def load_server_file(self, path: Path) -> None:
        """Take a large file on the server (:mod:`dpsynth.server_files`): its first rows for the preview and
        draft schema; a release counts the whole file on DuckDB. Its budget is keyed by the file's bytes."""
        from dpsynth.server_files import head

        self.load(head(path), path.name, source=path)
        self.source_path = path

    def set_schema(self, schema: Schema) -> None:
        """Replace the editor table by a schema (loaded JSON, private estimates); columns not in it are excluded."""
        cols = list(map(str, self.data.columns)) if self.data is not None else schema.names
        unknown = [n for n in schema.names if n not in cols]
        if unknown:
            raise InputError(f"The schema names column(s) {', '.join(map(repr, unknown))} that the data does not have.")
        self.schema_table = schema_to_table(schema, cols, previous=self.schema_table)
        self.editor_version += 1

    def replace_column(self, column: Column) -> None:
        """Put one column spec into the editor table (e.g. a private estimate)."""
        if self.schema_table is None:
            raise InputError("Load a dataset first.")
        table = self.schema_table.copy()
        idx = table.index[table["column"] == column.name]
        if len(idx) != 1:
            raise InputError(f"No column {column.name!r} in the schema table.")
        row = _column_row(column, include=True)
        for k, v in row.items():
            table.at[idx[0], k] = v
        self.schema_table = _typed(table)
        self.editor_version += 1

    def template_column(self, name: str) -> Column:
        """The column's kind, bins, whole-number flag and missing flag from the table, with placeholder values
        (what a private estimate keeps; its bounds or categories are then estimated)."""
        if self.schema_table is None:
            raise InputError("Load a dataset first.")
        rows = self.schema_table.loc[self.schema_table["column"] == name]
        if len(rows) != 1:
            raise InputError(f"No column {name!r} in the schema table.")
        row = rows.iloc[0]
        if row["type"] == "numeric":
            bins = int(row["bins"]) if not pd.isna(row["bins"]) and int(row["bins"]) >= 1 else 10
            # [0, bins] with `bins` bins holds one whole number per bin, so the placeholder is always valid
            return NumericColumn(name=name, lower=0.0, upper=float(bins), bins=bins, integer=bool(row["integer"]),
                                 decimals=_decimals_of(row), missing=bool(row["missing"]))
        return CategoricalColumn(name=name, categories=("placeholder",), missing=bool(row["missing"]))

    def take_edits(self, edited: pd.DataFrame) -> None:
        """Accept the editor's table; a data-derived or estimated value the curator retyped becomes 'public'."""
        if self.schema_table is None:
            return
        self.schema_table = mark_edits_public(self.schema_table, _typed(edited))

    def clear_release(self) -> None:
        """Forget the current release and its analyses (the ledger keeps its spend)."""
        self.release = None
        self.release_files = {}
        self.release_zip = b""
        self.release_error = None
        self.release_messages = []
        self.analyses = {}

    @property
    def editor_key(self) -> str:
        """Widget key of the schema editor (changes when the table is replaced programmatically)."""
        return f"schema_editor_{self.editor_version}"


def get_state(session: MutableMapping[str, Any]) -> AppState:
    """The session's :class:`AppState`, created on first access (the one place state is initialised)."""
    state = session.get(STATE_KEY)
    if not isinstance(state, AppState):
        state = AppState()
        session[STATE_KEY] = state
    return state


# ---------------------------------------------------------------- schema ↔ editor table
def _column_row(col: Column, include: bool) -> dict[str, Any]:
    if isinstance(col, NumericColumn):
        return {"include": include, "column": col.name, "type": "numeric", "lower": float(col.lower),
                "upper": float(col.upper), "bins": int(col.bins), "integer": bool(col.integer),
                "decimals": pd.NA if col.decimals is None else int(col.decimals), "categories": "",
                "missing": bool(col.missing), "unknown": "", "source": SOURCE_LABELS[col.provenance]}
    return {"include": include, "column": col.name, "type": "categorical", "lower": math.nan, "upper": math.nan,
            "bins": pd.NA, "integer": False, "decimals": pd.NA, "categories": ", ".join(col.categories),
            "missing": bool(col.missing), "unknown": col.on_unknown, "source": SOURCE_LABELS[col.provenance]}


def _typed(table: pd.DataFrame) -> pd.DataFrame:
    """Fix the dtypes the editor expects (bool, float, nullable int, text)."""
    t = table.copy()
    for c in ("include", "integer", "missing"):
        t[c] = t[c].fillna(False).astype(bool)
    for c in ("lower", "upper"):
        t[c] = pd.to_numeric(t[c], errors="coerce").astype("float64")
    t["bins"] = pd.to_numeric(t["bins"], errors="coerce").round().astype("Int64")
    if "decimals" not in t:  # tables saved before the column existed
        t["decimals"] = pd.NA
    t["decimals"] = pd.to_numeric(t["decimals"], errors="coerce").round().astype("Int64")
    if "unknown" not in t:  # tables saved before the column existed
        t["unknown"] = ""
    t["unknown"] = t["unknown"].astype("string").fillna("")
    t.loc[(t["type"] == "categorical") & (t["unknown"] == ""), "unknown"] = "error"
    for c in ("column", "type", "categories", "source"):
        t[c] = t[c].astype("string").fillna("")
    return t[TABLE_COLUMNS].reset_index(drop=True)


def schema_to_table(schema: Schema, columns: list[str], previous: pd.DataFrame | None = None) -> pd.DataFrame:
    """Editor rows for every data column: schema columns included, others excluded (kept from ``previous``)."""
    prev = {} if previous is None else {r["column"]: r for r in previous.to_dict("records")}
    rows = []
    for name in columns:
        if name in schema.names:
            rows.append(_column_row(schema.column(name), include=True))
        elif name in prev:
            rows.append({**prev[name], "include": False})
        else:
            rows.append({"include": False, "column": name, "type": "categorical", "lower": math.nan, "upper": math.nan,
                         "bins": pd.NA, "integer": False, "decimals": pd.NA, "categories": "", "missing": False,
                         "unknown": "error", "source": ""})
    return _typed(pd.DataFrame(rows, columns=TABLE_COLUMNS))


def _decimals_of(row: Any) -> int | None:
    """The row's declared decimals (empty: continuous values)."""
    d = row["decimals"] if "decimals" in row else pd.NA
    return None if pd.isna(d) else int(d)


def split_categories(text: str) -> tuple[str, ...]:
    """Comma-separated categories → tuple (spaces around commas ignored, empty items dropped)."""
    return tuple(p.strip() for p in str(text).split(",") if p.strip())


def table_to_schema(table: pd.DataFrame) -> tuple[Schema | None, list[str]]:
    """The schema of the included rows, or None and one message per problem (naming the column)."""
    cols: list[Column] = []
    errors: list[str] = []
    for row in _typed(table).to_dict("records"):
        if not row["include"]:
            continue
        name = str(row["column"])
        provenance = _LABEL_TO_SOURCE.get(str(row["source"]), "public")
        try:
            if row["type"] == "numeric":
                lo, hi, bins = row["lower"], row["upper"], row["bins"]
                if pd.isna(lo) or pd.isna(hi):
                    raise InputError(f"Column {name!r}: enter a lower and an upper bound.")
                if pd.isna(bins):
                    raise InputError(f"Column {name!r}: enter the number of bins.")
                cols.append(NumericColumn(name=name, lower=float(lo), upper=float(hi), bins=int(bins),
                                          integer=bool(row["integer"]), decimals=_decimals_of(row),
                                          missing=bool(row["missing"]), provenance=provenance))
            elif row["type"] == "categorical":
                cats = split_categories(row["categories"])
                if not cats:
                    raise InputError(f"Column {name!r}: list its categories, separated by commas.")
                cols.append(CategoricalColumn(name=name, categories=cats, missing=bool(row["missing"]),
                                              on_unknown=str(row["unknown"]) or "error", provenance=provenance))
            else:
                raise InputError(f"Column {name!r}: type must be numeric or categorical, got {row['type']!r}.")
        except DPSynthError as exc:
            errors.append(str(exc))
    if errors:
        return None, errors
    if not cols:
        return None, ["Include at least one column."]
    try:
        return Schema(tuple(cols)), []
    except DPSynthError as exc:
        return None, [str(exc)]


_VALUE_FIELDS = ("type", "lower", "upper", "categories")


def mark_edits_public(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """Rows whose type, bounds or categories the curator changed by hand get source 'public'.

    A value the curator types is theirs (public knowledge); a value left as drafted keeps its
    'from data — NOT private' flag. The curator may also pick 'public' in the source column.
    """
    out = after.copy()
    b = before.set_index("column")
    for i, row in out.iterrows():
        name = row["column"]
        if name not in b.index or row["source"] == SOURCE_LABELS["public"]:
            continue
        old = b.loc[name]
        if row["source"] == SOURCE_LABELS["private"] and old["source"] != SOURCE_LABELS["private"]:
            # only an estimate charged to the ledger may carry this label; a hand-made one is the curator's
            out.at[i, "source"] = SOURCE_LABELS["public"]
            continue
        changed = any(not _same(old[f], row[f]) for f in _VALUE_FIELDS)
        if changed:
            out.at[i, "source"] = SOURCE_LABELS["public"]
    return out


def _same(a: Any, b: Any) -> bool:
    if pd.isna(a) and pd.isna(b):
        return True
    if pd.isna(a) or pd.isna(b):
        return False
    return bool(a == b)


# ---------------------------------------------------------------- plain-language helpers (text only)
def epsilon_guidance(epsilon: float) -> str:
    """One sentence on what a value of ε means for a person in the data."""
    factor = math.exp(epsilon)
    if epsilon <= 0.5:
        level = "Strong protection: results are close to what they would be without any one person."
    elif epsilon <= 2:
        level = "Moderate protection, a common choice for statistical releases."
    elif epsilon <= 8:
        level = "Weaker protection; used by some large deployments, usually with a limited time window."
    else:
        level = "Weak protection per release: only with strong reasons and few releases."
    return (f"{level} Anything the release says about one person is at most {factor:,.3g}× more (or less) likely"
            f" with that person in the data than without them (e^ε = {factor:,.3g}).")


#: Privacy-loss parameters of well-known deployments (approximate; sources in the dashboard text).
REFERENCE_DEPLOYMENTS: list[dict[str, str]] = [
    {"deployment": "US Census 2020 redistricting data (P.L. 94-171)", "epsilon": "≈ 17.14 (persons) + 2.47 (housing units)",
     "note": "whole country, one release; δ = 10⁻¹⁰; zCDP converted to (ε, δ)"},
    {"deployment": "Google COVID-19 Community Mobility Reports", "epsilon": "≈ 2.64 per person per day",
     "note": "0.44 for each of 6 metrics, per day"},
    {"deployment": "Google COVID-19 Vaccination Search Insights", "epsilon": "≈ 2.19 per day",
     "note": "δ = 10⁻⁵, a user's daily searches"},
    {"deployment": "Apple on-device data (emoji, QuickType, Safari …)", "epsilon": "≈ 2 – 8 per day",
     "note": "local DP, per donation type and day"},
    {"deployment": "Textbook rule of thumb", "epsilon": "≤ 1", "note": "strong protection for a single release"},
]


@contextmanager
def show_errors() -> Iterator[None]:
    """Show a dpsynth error as a message in the page (``st.error``) instead of a traceback."""
    try:
        yield
    except DPSynthError as exc:
        import streamlit as st

        st.error(str(exc))
