"""Re-sampling a release (post-processing, no ε): every route draws the rows the release's own files describe.

A marginals or histogram release with numeric columns carries a value model (value_model.json), the released
fine distribution each synthetic value is drawn from inside its bin. The command line's ``resample`` and
``archive get --rows`` (the dashboard's Releases page uses the same function) once drew from the bins alone:
a column that is 0 for most rows came back with almost no 0s.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpsynth import noise
from dpsynth.cli import main
from dpsynth.randomness import post_processing_seed
from dpsynth.release import Release
from dpsynth.schema import CategoricalColumn, NumericColumn, Schema
from dpsynth.writer import synthetic_bytes

ROWS = 700


def _expected(rel: Release, rows: int, seed: int) -> bytes:
    """The bytes a re-sample of ``rows`` rows with the seeded generator must have: the release's own sampler and
    value model (:meth:`Release.resample`'s rows, written by the release's writer)."""
    return synthetic_bytes(rel.sampler(rows, post_processing_seed(noise.seeded_rng(seed))), rel.schema,
                           values=rel.values)


@pytest.fixture
def released(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path, str]:
    """A table whose amount is 0 for 70% of its rows (bins of 200 on [0, 1000]), its schema and a ledger (whose
    archive sits beside it)."""
    monkeypatch.delenv("DPSYNTH_ARCHIVE", raising=False)
    rng = np.random.default_rng(0)
    n = 3000
    amount = np.where(rng.random(n) < 0.7, 0, rng.integers(1, 1000, n))
    df = pd.DataFrame({"amount": amount, "group": rng.choice(["a", "b", "c"], n)})
    schema = Schema((NumericColumn(name="amount", lower=0, upper=1000, bins=5),
                     CategoricalColumn(name="group", categories=("a", "b", "c"))))
    df.to_csv(tmp_path / "data.csv", index=False)
    (tmp_path / "schema.json").write_text(schema.to_json(), encoding="utf-8")
    led = tmp_path / "ledger.sqlite"
    assert main(["ledger", "init", "--ledger", str(led)]) == 0
    return tmp_path, tmp_path / "data.csv", tmp_path / "schema.json", str(led)


def _release(tmp: Path, data: Path, schema: Path, led: str, method: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["release", str(data), "--schema", str(schema), "--epsilon", "2", "--method", method,
                 "--out", str(tmp / "s.csv"), "--zip-out", str(tmp / "r.zip"), "--model-out" if method == "marginals"
                 else "--histogram-out", str(tmp / ("m.json" if method == "marginals" else "h.csv")),
                 "--ledger", led, "--seed", "5"]) == 0
    return re.search(r"Archived as (\S+)", capsys.readouterr().out).group(1)


def _zero_share(csv: Path | bytes) -> float:
    import io

    df = pd.read_csv(io.BytesIO(csv) if isinstance(csv, bytes) else csv)
    return float((df["amount"] == 0).mean())


@pytest.mark.parametrize("method", ["marginals", "histogram"])
def test_every_resample_route_draws_from_the_released_value_model(released, capsys, method: str) -> None:
    tmp, data, schema, led = released
    rid = _release(tmp, data, schema, led, method, capsys)
    rel = Release.load(tmp / "r.zip")
    assert rel.values is not None
    assert _zero_share(tmp / "s.csv") > 0.6  # the release's own rows keep the point mass
    want = _expected(rel, ROWS, 11)
    assert _zero_share(want) > 0.6

    # the command line from the zip, and from the folder archive get writes
    assert main(["resample", str(tmp / "r.zip"), "--rows", str(ROWS), "--out", str(tmp / "z.csv"), "--seed", "11"]) == 0
    assert (tmp / "z.csv").read_bytes() == want
    assert main(["archive", "get", rid, "--out", str(tmp / "got"), "--ledger", led]) == 0
    assert main(["resample", str(tmp / "got"), "--rows", str(ROWS), "--out", str(tmp / "f.csv"), "--seed", "11"]) == 0
    assert (tmp / "f.csv").read_bytes() == want

    # the release's table with its value model beside it (named, as --value-model)
    table = tmp / ("m.json" if method == "marginals" else "h.csv")
    assert main(["resample", str(table), "--schema", str(schema), "--value-model", str(tmp / "got" / "value_model.json"),
                 "--rows", str(ROWS), "--out", str(tmp / "t.csv"), "--seed", "11"]) == 0
    assert (tmp / "t.csv").read_bytes() == want

    # archive get --rows (the dashboard's Releases page calls the same resample_archived)
    assert main(["archive", "get", rid, "--out", str(tmp / "more"), "--ledger", led, "--rows", str(ROWS)]) == 0
    assert _zero_share(tmp / "more" / "synthetic.csv") > 0.6
    from dpsynth.archive import Archive, archive_path_for, resample_archived

    assert resample_archived(Archive(archive_path_for(led)), rid, ROWS, rng=noise.seeded_rng(11)) == want


def test_resample_without_the_value_model_says_so(released, capsys) -> None:
    tmp, data, schema, led = released
    _release(tmp, data, schema, led, "marginals", capsys)
    assert main(["resample", str(tmp / "m.json"), "--schema", str(schema), "--rows", "50", "--out",
                 str(tmp / "u.csv"), "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "--value-model" in out and "amount" in out


@pytest.mark.parametrize("out", ["r.xlsx", "r.zip", "m.json", "sub/r.csv", "."])
def test_resample_refuses_an_output_it_cannot_or_must_not_write(released, capsys, out: str) -> None:
    """The release's rules for its synthetic output (Outputs.check), and never over the files read."""
    tmp, data, schema, led = released
    _release(tmp, data, schema, led, "marginals", capsys)
    before = {p: p.read_bytes() for p in tmp.iterdir() if p.is_file()}
    src = "m.json" if out == "m.json" else "r.zip"
    extra = ["--schema", str(schema)] if src == "m.json" else []
    assert main(["resample", str(tmp / src), *extra, "--rows", "50", "--out", str(tmp / out), "--seed", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert {p: p.read_bytes() for p in tmp.iterdir() if p.is_file()} == before


def test_resample_refuses_a_value_model_of_another_schema(released, capsys) -> None:
    tmp, data, schema, led = released
    _release(tmp, data, schema, led, "marginals", capsys)
    assert main(["archive", "get", _archived_id(led), "--out", str(tmp / "got"), "--ledger", led]) == 0
    other = Schema((NumericColumn(name="amount", lower=0, upper=50, bins=5),
                    CategoricalColumn(name="group", categories=("a", "b", "c"))))
    (tmp / "other.json").write_text(other.to_json(), encoding="utf-8")
    assert main(["resample", str(tmp / "m.json"), "--schema", str(tmp / "other.json"), "--value-model",
                 str(tmp / "got" / "value_model.json"), "--rows", "50", "--out", str(tmp / "o.csv")]) == 2
    assert "Traceback" not in capsys.readouterr().err
    assert not (tmp / "o.csv").exists()


def _archived_id(led: str) -> str:
    from dpsynth.archive import Archive, archive_path_for

    return Archive(archive_path_for(led)).list()[0].release_id


def test_resample_never_writes_into_the_release_folder_it_reads(released, capsys) -> None:
    tmp, data, schema, led = released
    _release(tmp, data, schema, led, "marginals", capsys)
    assert main(["archive", "get", _archived_id(led), "--out", str(tmp / "got"), "--ledger", led]) == 0
    before = (tmp / "got" / "synthetic.csv").read_bytes()
    assert main(["resample", str(tmp / "got"), "--rows", "50", "--out", str(tmp / "got" / "synthetic.csv")]) == 2
    assert "inside the release folder" in capsys.readouterr().err
    assert (tmp / "got" / "synthetic.csv").read_bytes() == before


@pytest.mark.parametrize("given", ["marginals.csv", "synthetic.csv"])
def test_resample_names_the_wrong_file_of_a_release(released, capsys, given: str) -> None:
    """Another file of the release given as the histogram (its marginals.csv, or its synthetic rows) is named for
    what it is, not blamed on a label the schema lacks."""
    tmp, data, schema, led = released
    rid = _release(tmp, data, schema, led, "marginals", capsys)
    assert main(["archive", "get", rid, "--out", str(tmp / "got"), "--ledger", led]) == 0
    capsys.readouterr()
    assert main(["resample", str(tmp / "got" / given), "--schema", str(schema), "--rows", "50", "--out",
                 str(tmp / "w.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert ("marginals.csv" in err and "model.json" in err) if given == "marginals.csv" else "synthetic rows" in err
    assert "label" not in err and not (tmp / "w.csv").exists()
