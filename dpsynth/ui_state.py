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

import hashlib
import json
import math
import uuid
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from dpsynth.accounting import Ledger, PrivacyBudget, default_ledger_path
from dpsynth.drafting import draft_schema
from dpsynth.errors import DPSynthError, InputError
from dpsynth.humanize import budget, likelihood_factor, number
from dpsynth.identity import table_identity
from dpsynth.mechanisms import check_epsilon
from dpsynth.release import DEFAULT_TOTAL_BUDGET, Release
from dpsynth.schema import CategoricalColumn, Column, NumericColumn, Schema, field_sources

STATE_KEY = "dpsynth_state"

#: ε a dashboard release may ask for. The library accepts any finite ε > 0; below 0.01 the noise swamps
#: any table and at 50 a person's presence may change the odds by e^50, no guarantee worth the name.
EPSILON_RANGE: tuple[float, float] = (0.01, 50.0)
#: ε offered for a newly loaded dataset (lowered to what its budget has left).
DEFAULT_EPSILON = 1.0
DEFAULT_DELTA = 1e-6
#: Shown on the checking pages when the release was made with settings other than the current ones.
STALE_NOTE = (":material/history: This page checks the release you made earlier, with different settings (ε, δ, noise,"
              " method or schema) from the current ones. Make a new release on the Release page to check those.")

SOURCE_LABELS: dict[str, str] = {
    "public": "public",
    "data": "from data — NOT private",
    "private": "private estimate (charged)",
}
_LABEL_TO_SOURCE = {v: k for k, v in SOURCE_LABELS.items()}

TABLE_COLUMNS = ["include", "column", "type", "lower", "upper", "bins", "integer", "decimals", "categories", "missing",
                 "unknown", "source", "src_lower", "src_upper", "src_bins", "src_categories"]
#: Hidden editor columns holding each field's provenance ('public', 'data', 'private'); 'source' is their summary.
SOURCE_FIELDS = ("lower", "upper", "bins", "categories")
_FIELDS_OF = {"numeric": ("lower", "upper", "bins"), "categorical": ("categories",)}


@dataclass
class AppState:
    """Everything one dashboard session remembers (one object, initialised in :func:`get_state`)."""

    # --- data (private: only in this session)
    data: pd.DataFrame | None = None
    data_name: str = ""
    data_label: str = ""
    sample: str | None = None  # name of the bundled sample, if one is loaded
    upload_id: str | None = None  # the uploaded file last read, so reruns do not read it again
    dataset_id: str | None = None  # dpsynth.identity.table_identity, the dataset's key in the ledger
    loaded_datasets: list[str] = field(default_factory=list)  # every dataset this session loaded (ledger visibility)
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
    accept_data_derived: bool = False  # the curator explicitly accepts publishing values read off the data
    # --- release (drawn once, behind the button)
    release: Release | None = None
    release_error: str | None = None
    release_files: dict[str, bytes] = field(default_factory=dict)  # the release's downloads, built once
    release_zip: bytes = b""
    release_attempt: int = 0  # part of the Release button's key: a double click cannot release twice
    release_messages: list[str] = field(default_factory=list)
    release_settings: str | None = None  # settings_key() when the shown release was made
    release_job_id: str | None = None  # a release running on the server for this session (dpsynth.jobs)
    pending_settings: str | None = None  # settings_key() of that running release
    session_token: str = field(default_factory=lambda: uuid.uuid4().hex)  # owner of this session's jobs
    schema_restored: bool = False  # the schema was restored from this dataset's kept schema work
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

    def settings_key(self) -> str:
        """A short fingerprint of the public settings a release is made with (data, schema, ε, δ, noise,
        neighbours, method, unit of protection, row-count hint). No private value enters it."""
        # the included rows of the editor table stand for the schema (hashing them is cheaper than parsing them)
        table = self.schema_table
        included = None if table is None else table.loc[table["include"]].reset_index(drop=True)
        schema_hash = None if included is None else \
            hashlib.sha256(pd.util.hash_pandas_object(included, index=False).to_numpy().tobytes()).hexdigest()
        settings = {
            "dataset": self.dataset_id, "schema": schema_hash,
            "epsilon": float(self.epsilon), "delta": float(self.spend_delta()), "mechanism": self.mechanism,
            "neighbours": self.neighbours, "method": self.method, "id_column": self.id_column,
            "max_contributions": int(self.max_contributions), "expected_rows": self.expected_rows,
        }
        return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:16]

    @property
    def release_is_stale(self) -> bool:
        """True when the shown release was made with settings other than the current ones."""
        return self.release is not None and self.release_settings is not None and \
            self.release_settings != self.settings_key()

    def budget_left(self) -> PrivacyBudget:
        """What this dataset may still spend (its recorded total, or the session's total if new)."""
        ledger = self.ledger()
        total = ledger.total(self.dataset_id) if self.dataset_id else None
        spent = ledger.spent(self.dataset_id) if self.dataset_id else PrivacyBudget(0.0)
        return (total or self.budget()) - spent

    def release_blocker(self) -> str | None:
        """Why the next release would be refused before any spend (budget left, ε out of range), or None."""
        problem = epsilon_problem(self.epsilon)
        if problem:
            return problem + " Change it on the Privacy page."
        left = self.budget_left()
        if left.epsilon < 1e-9:
            return ("This dataset's privacy budget is used up (ε left: 0). No further release of this data can be"
                    " made: every release adds to what can be learnt about the same people. Use a release you"
                    " already made, or load a different dataset.")
        if self.epsilon > left.epsilon + 1e-9:
            return (f"This release asks for ε = {number(self.epsilon)} but only ε = {budget(left.epsilon)} is left in"
                    f" this dataset's budget. Lower ε to at most {budget(left.epsilon)} on the Privacy page.")
        schema, _ = self.schema()
        if schema is not None and not self.accept_data_derived:
            from dpsynth.provenance import data_derived_summary

            derived = data_derived_summary(schema)
            if derived:
                return (f"The schema still holds values read off the data, which are not private: {derived}. On the"
                        " Schema page, replace them with public values, estimate them privately, or explicitly"
                        " accept publishing them (the release card then says so first).")
        delta = self.spend_delta()
        if delta > left.delta * (1 + 1e-9):
            return (f"This release asks for δ = {number(delta)} but only δ = {number(left.delta)} is left. Choose"
                    " Laplace noise (δ = 0) or a smaller δ on the Privacy page.")
        return None

    # ------------------------------------------------------------ curator-only checks of the current release
    def comparison_tables(self) -> tuple[pd.DataFrame, Any, Any]:
        """The real table with its numbers parsed, and the real and synthetic tables' cell codes (once per release)."""
        if "tables" not in self.analyses:
            from dpsynth.binning import encode
            from dpsynth.utility import with_numbers

            schema = self.release.schema
            real = with_numbers(self.data, schema)
            self.analyses["tables"] = (real, encode(real, schema).codes, encode(self.release.synthetic, schema).codes)
        return self.analyses["tables"]

    def fidelity(self) -> dict[str, Any]:
        """One- and two-column TVDs of the release against the real data (:func:`dpsynth.utility.fidelity`)."""
        if "fidelity" not in self.analyses:
            from dpsynth.utility import fidelity_of_codes

            _, rc, sc = self.comparison_tables()
            self.analyses["fidelity"] = fidelity_of_codes(rc, sc, self.release.schema)
        return self.analyses["fidelity"]

    def value_comparisons(self) -> dict[str, dict[str, Any]]:
        """Raw values of the numeric columns, real vs synthetic (:func:`dpsynth.utility.value_comparisons`)."""
        if "values" not in self.analyses:
            from dpsynth.utility import value_comparisons

            self.analyses["values"] = value_comparisons(self.comparison_tables()[0], self.release.synthetic,
                                                        self.release.schema)
        return self.analyses["values"]

    def prepare_checks(self) -> None:
        """Compute the Utility page's heavy comparisons now (e.g. in the background right after a release), so the
        page's first view only draws. Curator-only analyses: nothing here is released or charged."""
        if self.release is not None and self.data is not None:
            self.fidelity()
            self.value_comparisons()

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
        # one budget per table, whichever file format or interface brought it (dpsynth.identity);
        # a server file is read whole from its path (df is then only its first rows)
        self.dataset_id = table_identity(source if isinstance(source, str | Path) else df)
        if self.dataset_id not in self.loaded_datasets:
            self.loaded_datasets.append(self.dataset_id)
        if public_schema is not None:
            self.schema_table = schema_to_table(public_schema, list(map(str, df.columns)))
            self.left_out = [c for c in map(str, df.columns) if c not in public_schema.names]
        else:
            draft, left_out = draft_schema(df)
            self.schema_table = schema_to_table(draft, list(map(str, df.columns)))
            self.left_out = left_out
        kept = self.schema_store().load(self.dataset_id)
        self.schema_restored = False
        if kept is not None and len(kept) and list(kept.columns) == list(self.schema_table.columns):
            # the same table loaded again: the curator's schema work (public values, private estimates) comes back
            # over the fresh draft, row by row
            table = self.schema_table.copy()
            where = {str(c): i for i, c in zip(table.index, table["column"].astype(str), strict=True)}
            for _, row in kept.iterrows():
                if str(row["column"]) in where:
                    table.loc[where[str(row["column"])]] = row.to_numpy()
                    self.schema_restored = True
            self.schema_table = table
        self.editor_version += 1
        self.clear_release()
        self.reset_privacy_choices()

    def reset_privacy_choices(self) -> None:
        """Per-dataset choices back to their defaults for a new dataset; ε lowered to what its budget has left."""
        self.delta = DEFAULT_DELTA
        self.method = "auto"
        self.id_column = None
        self.max_contributions = 1
        self.expected_rows = None
        self.epsilon = DEFAULT_EPSILON
        if not Path(self.ledger_path).exists():  # no ledger yet: nothing spent anywhere (and none created here)
            return
        try:
            left = self.budget_left().epsilon
        except (DPSynthError, OSError):
            return
        if 0 < left < DEFAULT_EPSILON:
            # rounded down (within the ledger's float slack), so the default never asks for more than is left
            self.epsilon = max(EPSILON_RANGE[0], math.floor(left * 1000 + 1e-6) / 1000)

    def fail_load(self, message: str, upload_id: str | None = None) -> None:
        """A load that failed: forget the previous dataset too, so nothing reads 'Loaded' for a table not asked for."""
        self.data = None
        self.source_path = None
        self.data_name = self.data_label = ""
        self.sample = None
        self.dataset_id = None
        self.schema_table = None
        self.left_out = []
        self.editor_version += 1
        self.clear_release()
        self.upload_id = upload_id
        self.load_error = message

    def load_server_file(self, path: Path) -> None:
        """Take a large file on the server (:mod:`dpsynth.server_files`): its first rows for the preview and
        draft schema; a release counts the whole file on DuckDB. Its budget is keyed by the whole table's identity."""
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
            src = _row_sources({**row, "type": "numeric"})
            return NumericColumn(name=name, lower=0.0, upper=float(bins), bins=bins, integer=bool(row["integer"]),
                                 decimals=_decimals_of(row), missing=bool(row["missing"]), sources={"bins": src["bins"]})
        return CategoricalColumn(name=name, categories=("placeholder",), missing=bool(row["missing"]))

    def take_edits(self, edited: pd.DataFrame) -> None:
        """Accept the editor's table; a data-derived or estimated value the curator retyped becomes 'public'."""
        if self.schema_table is None:
            return
        self.schema_table = mark_edits_public(self.schema_table, _typed(edited))

    def schema_store(self) -> Any:
        """Where this dataset's schema work is kept (beside the release archive)."""
        from dpsynth.schema_store import SchemaStore

        return SchemaStore.for_ledger(self.ledger_path)

    def save_schema_work(self) -> None:
        """Keep the curator's schema work with the dataset: the rows whose every value is public or a private
        estimate. A row still holding a value read off the data is never written to disk (it is not private);
        loading the table again drafts it afresh."""
        if self.dataset_id is None or self.schema_table is None:
            return
        kept = self.schema_table[self.schema_table["source"].map(
            lambda label: _LABEL_TO_SOURCE.get(str(label)) in ("public", "private"))]
        try:
            self.schema_store().save(self.dataset_id, kept)
        except OSError:
            pass  # the schema stays in this session; keeping it is a convenience, never a condition

    # ------------------------------------------------------------ releases on the server (dpsynth.jobs)
    def start_release(self, schema: Schema) -> None:
        """Start this release on its own thread; the pipeline charges the ledger and keeps the result in the
        release archive whatever happens to the page."""
        from dpsynth import jobs
        from dpsynth.archive import Archive
        from dpsynth.errors import DPSynthError
        from dpsynth.release import release, release_from_source

        self.save_schema_work()
        ledger = self.ledger()
        archive = Archive.for_ledger(ledger)
        common = dict(epsilon=self.epsilon, delta=self.spend_delta(), neighbours=self.neighbours,
                      mechanism=self.mechanism, method=self.method, seed=self.demo_seed, ledger=ledger,
                      dataset_id=self.dataset_id, dataset_label=self.data_label, budget=self.budget(),
                      expected_rows=self.expected_rows, archive=archive, accept_data_derived=self.accept_data_derived)
        if self.source_path is not None:
            if self.id_column:
                raise InputError("Several rows per person need an uploaded table for now; a server file counts one"
                                 " row per record.")
            path = self.source_path

            def run(progress):  # noqa: ANN001, ANN202 - (fraction, message) callback -> Release
                return release_from_source(path, schema, engine="duckdb", progress=progress, **common)
        else:
            data, id_column, k = self.data, self.id_column, self.max_contributions

            def run(progress):  # noqa: ANN001, ANN202
                return release(data, schema, id_column=id_column, max_contributions=k, progress=progress, **common)

        self.pending_settings = self.settings_key()
        self.release_job_id = jobs.start(run, owner=self.session_token, errors=(DPSynthError,)).id

    def release_job(self) -> Any:
        """The release this session started and has not taken yet (a :class:`dpsynth.jobs.Job`), or None."""
        from dpsynth import jobs

        return jobs.get(self.release_job_id, owner=self.session_token)

    def finish_release(self, job: Any) -> None:
        """Take a finished job's release (or its error) into the session."""
        self.release_job_id = None
        if job.status == "failed":
            self.release_error = job.error
            return
        rel = job.result
        self.release = rel
        self.release_settings = self.pending_settings
        self.release_files = rel.files()
        self.release_zip = rel.zip()
        self.release_error = None
        self.release_messages = rel.report.messages()
        self.analyses = {}

    def clear_release(self) -> None:
        """Forget the current release and its analyses (the ledger keeps its spend)."""
        self.release = None
        self.release_files = {}
        self.release_zip = b""
        self.release_error = None
        self.release_messages = []
        self.release_settings = None
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
    src = {f"src_{f}": p for f, p in field_sources(col).items()}
    if isinstance(col, NumericColumn):
        row = {"include": include, "column": col.name, "type": "numeric", "lower": float(col.lower),
               "upper": float(col.upper), "bins": int(col.bins), "integer": bool(col.integer),
               "decimals": pd.NA if col.decimals is None else int(col.decimals), "categories": "",
               "missing": bool(col.missing), "unknown": ""}
    else:
        row = {"include": include, "column": col.name, "type": "categorical", "lower": math.nan, "upper": math.nan,
               "bins": pd.NA, "integer": False, "decimals": pd.NA, "categories": ", ".join(col.categories),
               "missing": bool(col.missing), "unknown": col.on_unknown}
    row.update(src)
    row["source"] = source_text(_row_sources(row))
    return row


def _row_sources(row: Any) -> dict[str, str]:
    """The provenance of each field of an editor row's type."""
    kind = row["type"] if row["type"] in _FIELDS_OF else "categorical"
    return {f: (str(row.get(f"src_{f}")) if str(row.get(f"src_{f}") or "") in SOURCE_LABELS else "public")
            for f in _FIELDS_OF[kind]}


def source_text(sources: dict[str, str]) -> str:
    """A row's 'where the values come from': one label if every field shares it, else the fields per kind."""
    values = set(sources.values())
    if len(values) == 1:
        return SOURCE_LABELS[values.pop()]
    parts = []
    for p in ("data", "private"):
        fields = [f for f, v in sources.items() if v == p]
        if fields:
            parts.append(f"{SOURCE_LABELS[p]}: {', '.join(fields)}")
    return "; ".join(parts)


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
    legacy = any(f"src_{f}" not in t for f in SOURCE_FIELDS)
    for f in SOURCE_FIELDS:  # tables saved before per-field sources: every field takes the row's label
        col = f"src_{f}"
        if col not in t:
            t[col] = t["source"].map(lambda label: _LABEL_TO_SOURCE.get(str(label), "public"))
        t[col] = t[col].astype("string").fillna("public")
    if legacy:
        t["source"] = [source_text(_row_sources(r)) if r["include"] else "" for r in t.to_dict("records")]
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
                         "unknown": "error", "source": "", **{f"src_{f}": "public" for f in SOURCE_FIELDS}})
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
        sources = _row_sources(row)
        try:
            if row["type"] == "numeric":
                lo, hi, bins = row["lower"], row["upper"], row["bins"]
                if pd.isna(lo) or pd.isna(hi):
                    raise InputError(f"Column {name!r}: enter a lower and an upper bound.")
                if pd.isna(bins):
                    raise InputError(f"Column {name!r}: enter the number of bins.")
                cols.append(NumericColumn(name=name, lower=float(lo), upper=float(hi), bins=int(bins),
                                          integer=bool(row["integer"]), decimals=_decimals_of(row),
                                          missing=bool(row["missing"]), sources=sources))
            elif row["type"] == "categorical":
                cats = split_categories(row["categories"])
                if not cats:
                    raise InputError(f"Column {name!r}: list its categories, separated by commas.")
                cols.append(CategoricalColumn(name=name, categories=cats, missing=bool(row["missing"]),
                                              on_unknown=str(row["unknown"]) or "error", sources=sources))
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




def mark_edits_public(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """Each field the curator changed by hand gets source 'public'; the row's other fields keep theirs.

    A value the curator types is theirs (public knowledge); a value left as drafted keeps its
    'from data — NOT private' flag. Changing the type makes every field the curator's. Picking
    'public' in the source column declares every field of the row public knowledge; any other pick
    there is not the curator's to make (only a charged estimate is 'private') and is undone.
    """
    out = after.copy()
    b = before.set_index("column")
    for i, row in out.iterrows():
        name = row["column"]
        if name not in b.index:
            continue
        old = b.loc[name]
        fields = _FIELDS_OF.get(str(row["type"]), ())
        if str(row["source"]) != str(old["source"]) and row["source"] == SOURCE_LABELS["public"]:
            touched = list(fields)
        elif not _same(old["type"], row["type"]):
            touched = list(fields)
        else:
            touched = [f for f in fields if not _same(old[f], row[f])]
        for f in touched:
            out.at[i, f"src_{f}"] = "public"
        out.at[i, "source"] = source_text(_row_sources(out.loc[i])) if row["include"] else ""
    return out


def _same(a: Any, b: Any) -> bool:
    if pd.isna(a) and pd.isna(b):
        return True
    if pd.isna(a) or pd.isna(b):
        return False
    return bool(a == b)


# ---------------------------------------------------------------- plain-language helpers (text only)
def epsilon_problem(epsilon: float) -> str | None:
    """A sentence stating the allowed range when ε is outside it (the library's check first), else None."""
    lo, hi = EPSILON_RANGE
    stated = f"ε must be between {number(lo)} and {number(hi)}"
    try:
        e = check_epsilon(epsilon)
    except DPSynthError:
        return f"{stated}; {epsilon!r} is not."
    if not lo <= e <= hi:
        return f"{stated}; {number(e)} is not."
    return None


def epsilon_guidance(epsilon: float) -> str:
    """One sentence on what a value of ε means for a person in the data."""
    times = likelihood_factor(epsilon)
    if epsilon <= 0.5:
        level = "Strong protection: results are close to what they would be without any one person."
    elif epsilon <= 2:
        level = "Moderate protection, a common choice for statistical releases."
    elif epsilon <= 8:
        level = "Weaker protection; used by some large deployments, usually with a limited time window."
    else:
        level = "Weak protection per release: only with strong reasons and few releases."
    return (f"{level} Anything the release says about one person is at most {times} times more (or less)"
            " likely with that person in the data than without them.")


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


def editor_view(table: pd.DataFrame) -> pd.DataFrame:
    """The schema table as the editor shows it: numbers as plain text and empty cells blank (not "None")."""
    view = table.copy()
    for c in ("lower", "upper", "bins", "decimals"):
        view[c] = [("" if pd.isna(v) else format(float(v), ".15g")) for v in table[c]]
    return view
