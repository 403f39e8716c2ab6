"""``release()``: a private release of a table, for the Python API — the one pipeline underneath.

A release is a function of (data, schema, privacy parameters, generator); every entry point
(this module, the command line, the dashboard) runs :func:`dpsynth.pipeline.run`::

    plan → check → [count] → charge → measure → write

:class:`Release` is what comes back: the measured result (:mod:`dpsynth.results`: a noisy
histogram, a sparse one, or a marginal model), the card (:mod:`dpsynth.card`, built once), the
synthetic row count and the post-processing seed that, with the result, fix the synthetic rows
byte for byte. What encoding observed about the data (clamped values, dropped rows) is in
``Release.report`` for the curator and is not part of any released artifact.
"""

from __future__ import annotations

import io
import json
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from dpsynth.accounting import Ledger, PrivacyBudget
from dpsynth.binning import EncodingReport
from dpsynth.card import card_summary_line
from dpsynth.errors import InputError
from dpsynth.neighbours import Neighbours
from dpsynth.pipeline import DEFAULT_TOTAL_BUDGET, Outputs, run
from dpsynth.plan import ReleaseRequest, choose_method
from dpsynth.schema import Schema

Method = Literal["histogram", "marginals", "auto"]
Progress = Callable[[float, str], None]

#: A fixed timestamp inside the zip keeps identical releases byte-identical.
_ZIP_TIME = (2020, 1, 1, 0, 0, 0)


@dataclass
class Release:
    """What a release produced. The result's tables, the synthetic rows and ``card`` are released;
    ``report`` is for the curator's eyes only."""

    result: Any
    card: dict[str, Any]
    schema: Schema
    rows: int
    post_seed: int
    plan: Any = None
    report: EncodingReport = field(default_factory=EncodingReport)
    archive_id: str | None = None  # the release's id in the release archive, when one kept it
    values: Any = None  # dpsynth.value_model.ValueModel: released fine distributions of numeric columns
    _synthetic: pd.DataFrame | None = field(default=None, repr=False)
    # a release's files never change once made: the archive, the zip and the dashboard share one copy
    _made: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def method(self) -> str:
        return self.result.method

    @property
    def synthetic(self) -> pd.DataFrame:
        """The synthetic rows (the values of synthetic.csv), made on first use."""
        if self._synthetic is None:
            from dpsynth.results import sampler_frame

            self._synthetic = sampler_frame(self.sampler(), self.schema, self.values)
        return self._synthetic

    def sampler(self, rows: int | None = None, seed: int | None = None) -> Any:
        """The synthetic rows' sampler (the release's own for no arguments)."""
        return self.result.sampler(self.rows if rows is None else rows, self.post_seed if seed is None else seed)

    @property
    def histogram(self) -> pd.DataFrame | None:
        """The released noisy histogram table (histogram method), else None."""
        return self.result.tables()["histogram.csv"] if self.method == "histogram" else None

    @property
    def noisy_counts(self) -> np.ndarray | None:
        """The dense noisy counts (dense histogram only)."""
        return getattr(self.result, "counts", None)

    @property
    def model(self) -> Any:
        """The fitted marginal model (marginals method), else None."""
        return getattr(self.result, "model", None)

    @property
    def sparse(self) -> Any:
        """The sparse noisy histogram (huge domains), else None."""
        return getattr(self.result, "hist", None)

    @property
    def marginals(self) -> list[pd.DataFrame]:
        """The released noisy marginals of the marginals method (one table per measured set)."""
        return self.result.marginal_frames() if self.method == "marginals" else []

    def resample(self, rows: int, *, rng: np.random.Generator) -> pd.DataFrame:
        """New synthetic rows from the released histogram or model: post-processing, no new ε."""
        from dpsynth.randomness import post_processing_seed
        from dpsynth.results import sampler_frame

        return sampler_frame(self.sampler(rows, post_processing_seed(rng)), self.schema, self.values)

    def synthetic_bytes(self, *, parquet: bool = False) -> bytes:
        """synthetic.csv (or Parquet) exactly as every path writes it."""
        from dpsynth.writer import synthetic_bytes

        key = "synthetic.parquet" if parquet else "synthetic.csv"
        if key not in self._made:
            self._made[key] = synthetic_bytes(self.sampler(), self.schema, parquet=parquet, values=self.values)
        return self._made[key]

    def write_synthetic(self, path: str | Path, *, progress: Callable[[float, str], None] | None = None) -> int:
        """Stream the synthetic rows to ``path`` (CSV, or Parquet for a .parquet name); returns the row count."""
        from dpsynth.writer import write_synthetic_csv

        return write_synthetic_csv(self.sampler(), self.schema, path, progress=progress, values=self.values)

    def files(self) -> dict[str, bytes]:
        """Name → bytes of every released file."""
        from dpsynth.card import card_json, card_markdown

        files = {"synthetic.csv": self.synthetic_bytes(), **self.table_files(),
                 "schema.json": self.schema.to_json().encode("utf-8"),
                 "card.json": card_json(self.card).encode("utf-8"),
                 "card.md": card_markdown(self.card).encode("utf-8")}
        return files

    def table_files(self) -> dict[str, bytes]:
        """The released tables: the method's (histogram, or marginals and model) and the value model."""
        if "tables" not in self._made:
            files = dict(self.result.files())
            if self.values is not None:
                files["value_model.json"] = self.values.to_json().encode("utf-8")
            self._made["tables"] = files
        return dict(self._made["tables"])

    def zip(self) -> bytes:
        """All released files in one zip (deterministic bytes for the same release)."""
        if "zip" not in self._made:
            self._made["zip"] = zip_files(self.files())
        return self._made["zip"]

    def save(self, folder: str | Path) -> None:
        """Write every released file into ``folder`` (created if needed)."""
        f = Path(folder)
        f.mkdir(parents=True, exist_ok=True)
        for name, data in self.files().items():
            (f / name).write_bytes(data)

    @classmethod
    def from_files(cls, files: dict[str, bytes]) -> Release:
        """A release loaded back from its files (folder or zip): same tables, same synthetic rows."""
        from dpsynth.results import result_from_files

        if "card.json" not in files:
            raise InputError("This is not a dpsynth release: it has no card.json.")
        try:
            card = json.loads(files["card.json"].decode("utf-8"))
            schema = Schema.from_dict(card["schema"])
            pp = card["post_processing"]
            rows, seed = int(pp["synthetic_rows"]), int(pp["seed"], 16)
        except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise InputError(f"The release's card.json is not readable: {exc}.") from None
        values = None
        if "value_model.json" in files:
            from dpsynth.value_model import ValueModel

            values = ValueModel.from_bytes(files["value_model.json"])
            values.check(schema)
        return cls(result=result_from_files(files, schema, card), card=card, schema=schema, rows=rows, post_seed=seed,
                   values=values)

    @classmethod
    def load(cls, path: str | Path | bytes) -> Release:
        """A release from its zip (path or bytes) or folder."""
        return cls.from_files(read_release_files(path))


#: Deflate level per file name (others: zlib's default, 6). A model's conditional tables are digits that
#: level 6 shrinks only 12% more than level 1, in six times the time (Adult at ε = 1: 0.6 s against 0.1 s).
_ZIP_LEVELS = {"model.json": 1}


def zip_files(files: dict[str, bytes]) -> bytes:
    """Files in one zip with fixed timestamps (the same files give the same bytes)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data, compresslevel=_ZIP_LEVELS.get(name))
    return buf.getvalue()


#: Most bytes a release zip may expand to when read back.
MAX_RELEASE_BYTES = 2 * 1024**3


def read_release_files(path: str | Path | bytes) -> dict[str, bytes]:
    """Name → bytes of a release zip (path or bytes) or folder; a corrupt zip is an InputError."""
    if isinstance(path, str | Path) and Path(path).is_dir():
        return {f.name: f.read_bytes() for f in sorted(Path(path).iterdir()) if f.is_file()}
    try:
        src = io.BytesIO(path) if isinstance(path, bytes | bytearray) else path
        with zipfile.ZipFile(src) as zf:
            infos = [i for i in zf.infolist() if not i.is_dir()]
            if sum(i.file_size for i in infos) > MAX_RELEASE_BYTES:
                raise InputError("The release zip expands to more than 2 GB; it is not a dpsynth release.")
            return {Path(i.filename).name: zf.read(i) for i in infos}
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, zlib.error) as exc:
        raise InputError(f"The release file is not a readable zip: {exc}.") from None


def release(
    df: pd.DataFrame,
    schema: Schema,
    *,
    epsilon: float,
    delta: float = 0.0,
    neighbours: Neighbours | str = Neighbours.ADD_REMOVE,
    mechanism: str = "auto",
    method: Method = "auto",
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
    threshold: int = 1,
    archive: Any = None,
    value_share: float | None = None,
    accept_data_derived: bool = False,
) -> Release:
    """Release a noisy histogram (or noisy marginals) of a DataFrame and synthetic rows sampled from it.

    Guarantee: the released artifacts are (ε, δ)-DP with respect to the chosen neighbouring
    relation and unit of protection (a row, or a person with at most ``max_contributions`` rows
    in ``id_column``). With ``delta == 0`` noise is discrete Laplace (ε-DP); with ``delta > 0``
    it is discrete Gaussian unless ``mechanism='laplace'``. If a ``ledger`` is given the spend is
    committed to it before any noise is drawn, and a spend over the dataset's budget is refused.

    ``method`` "auto" (the default, as on the command line and the dashboard) decides from public inputs
    alone (:func:`dpsynth.plan.choose_method`): the full histogram when its noise leaves a table of
    ``expected_rows`` (10,000 if not given) readable, else the marginals method; "histogram" or
    "marginals" force one. ``rng`` defaults to a CSPRNG (:func:`dpsynth.noise.secure_rng`); ``seed`` makes the release
    reproducible and the card then says it is not for publication. Runs :func:`dpsynth.pipeline.run`.
    """
    if not isinstance(df, pd.DataFrame) or len(df.columns) == 0:
        raise InputError("The table has no columns.")
    req = ReleaseRequest(schema=schema, epsilon=epsilon, delta=delta, neighbours=_rel(neighbours), mechanism=mechanism,
                         method=method, rows=rows, expected_rows=expected_rows, id_column=id_column,
                         max_contributions=max_contributions, threshold=threshold, value_share=value_share,
                         accept_data_derived=accept_data_derived)
    return run(df, req, engine="pandas", rng=rng, seed=seed, ledger=ledger, dataset_id=dataset_id,
               dataset_label=dataset_label, budget=budget, purpose=purpose, created=created, progress=progress,
               archive=archive)


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
    method: Method = "auto",
    archive: Any = None,
    value_share: float | None = None,
    accept_data_derived: bool = False,
) -> Release:
    """The same release counted on an engine (:mod:`dpsynth.engines`: pandas, duckdb, spark) straight from
    ``source`` (a CSV/Parquet path, or a table native to the engine); only the counts come back.

    Guarantee and output: exactly :func:`release`'s (one pipeline; the engine is a counter). With
    ``synthetic_path`` the synthetic rows are streamed to that CSV (or Parquet) file in chunks.
    """
    req = ReleaseRequest(schema=schema, epsilon=epsilon, delta=delta, neighbours=_rel(neighbours), mechanism=mechanism,
                         method=method, rows=rows, expected_rows=expected_rows, threshold=threshold,
                         sparse_method=sparse_method, value_share=value_share,
                         accept_data_derived=accept_data_derived)
    return run(source, req, engine=engine, engine_options=engine_options, rng=rng, seed=seed, ledger=ledger,
               dataset_id=dataset_id, dataset_label=dataset_label, budget=budget, purpose=purpose, created=created,
               progress=progress, outputs=Outputs(synthetic=synthetic_path), archive=archive)


def resample(rel: Release, rows: int, *, rng: np.random.Generator) -> pd.DataFrame:
    """Synthetic rows from a release's noisy histogram or model (post-processing)."""
    return rel.resample(rows, rng=rng)


def model_marginal_frames(model: Any, schema: Schema) -> list[pd.DataFrame]:
    """Each noisy marginal of a fitted model as a table of cell labels and ``count``."""
    from dpsynth.results import MarginalResult

    return MarginalResult(schema, model).marginal_frames()


def _rel(neighbours: Neighbours | str) -> str:
    return Neighbours.parse(neighbours).value


__all__ = ["DEFAULT_TOTAL_BUDGET", "Release", "release", "release_from_source", "choose_method", "card_summary_line",
           "resample", "model_marginal_frames", "zip_files", "read_release_files"]
