"""Sessions (issue 4, part 4): nothing derived from an upload is shared between sessions or left on disk.

- Every cache that outlives a session — ``st.cache_data``/``st.cache_resource`` (global to the
  server), ``functools`` caches and module-level cache dicts (global to the process) — is on a
  public-only allowlist, with a reason, and none persists to disk.
- A canary string uploaded in one AppTest session (in values, in a value that fails to parse, in the
  file name) is found afterwards in no temporary directory, home directory, ledger file, log record
  or Streamlit cache. (Two real browser contexts: ``tests/e2e/test_isolation.py``.)
"""

from __future__ import annotations

import ast
import logging
import os
import pickle
import tempfile
import uuid
from pathlib import Path

import pytest

from dpsynth.accounting import Ledger
from dpsynth.ui_state import STATE_KEY

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "app.py"
SOURCES = sorted([APP, *(ROOT / "pages").glob("*.py"), *(ROOT / "dpsynth").rglob("*.py")])

#: "file:function or name" → why it holds public values only. Anything cached across sessions
#: must be listed here after a review; nothing that takes uploaded data may be.
PUBLIC_ONLY: dict[str, str] = {
    "dpsynth/noise.py:_D_STEP_CACHE": "lookup tables of the exact sampler, keyed by the public noise scale",
    "dpsynth/inference.py:_base_variance": "variance of one noise draw, keyed by the released (public) noise law",
    "dpsynth/inference.py:_pmf_table": "pmf of a sum of k noise draws, keyed by the released noise law and k (from"
                                       " the public schema)",
    "dpsynth/marginals/estimation.py:_sum_plan": "vectors of ones, keyed by a table's shape (products of the public"
                                                 " schema's column sizes), the axes kept and the dtype",
}
CACHE_DECORATORS = {"cache_data", "cache_resource", "experimental_memo", "experimental_singleton", "lru_cache", "cache"}


def _cached_things(path: Path) -> list[tuple[str, int, str]]:
    """(name, line, kind) of every cache in a source file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[str, int, str]] = []
    decorators: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for dec in node.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                decorators.add(id(target))
                name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                if name in CACHE_DECORATORS:
                    found.append((node.name, node.lineno, name))
                    if isinstance(dec, ast.Call):
                        for kw in dec.keywords:
                            assert kw.arg != "persist", f"{path.name}:{node.lineno} persists a cache to disk"
        elif (isinstance(node, ast.Attribute) and node.attr in {"cache_data", "cache_resource", "experimental_memo"}
              and id(node) not in decorators):
            found.append((f"<{node.attr} at line {node.lineno}>", node.lineno, node.attr))
    for node in tree.body:  # module-level dicts/sets named like caches live as long as the process
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name) and ("CACHE" in t.id.upper() or "MEMO" in t.id.upper()):
                    found.append((t.id, node.lineno, "module-level"))
    return found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_cross_session_cache_is_on_the_public_only_allowlist(path: Path) -> None:
    rel = str(path.relative_to(ROOT))
    for name, line, kind in _cached_things(path):
        key = f"{rel}:{name}"
        assert key in PUBLIC_ONLY, (
            f"{rel}:{line}: {kind} cache {name!r} is shared by every session; if it can never hold anything derived"
            " from uploaded data, add it to PUBLIC_ONLY with the reason"
        )


def test_the_allowlist_has_no_stale_entries() -> None:
    live = {f"{p.relative_to(ROOT)}:{name}" for p in SOURCES for name, _, _ in _cached_things(p)}
    assert set(PUBLIC_ONLY) <= live


def test_the_cache_scanner_sees_caches(tmp_path: Path) -> None:
    """The scanner itself: each form of cache in a sample file is found."""
    sample = tmp_path / "page.py"
    sample.write_text(
        "import functools\nimport streamlit as st\n_RESULT_CACHE = {}\n"
        "@st.cache_data\ndef a(df): ...\n@st.cache_resource(ttl=5)\ndef b(x): ...\n"
        "@functools.lru_cache(maxsize=8)\ndef c(x): ...\nd = st.cache_data(lambda df: df)\n"
    )
    kinds = sorted(k for _, _, k in _cached_things(sample))
    assert kinds == ["cache_data", "cache_data", "cache_resource", "lru_cache", "module-level"]
    sample.write_text("import streamlit as st\n@st.cache_data(persist='disk')\ndef a(df): ...\n")
    with pytest.raises(AssertionError, match="persists"):
        _cached_things(sample)


# ---------------------------------------------------------------- the canary


@pytest.fixture
def isolated_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Temp dir, home and ledger of the session under test, each in its own empty directory."""
    dirs = {name: tmp_path / name for name in ("tmp", "home", "ledger")}
    for d in dirs.values():
        d.mkdir()
    monkeypatch.setenv("TMPDIR", str(dirs["tmp"]))
    monkeypatch.setattr(tempfile, "tempdir", str(dirs["tmp"]))
    monkeypatch.setenv("HOME", str(dirs["home"]))
    monkeypatch.setenv("DPSYNTH_LEDGER", str(dirs["ledger"] / "ledger.sqlite"))
    return dirs


def files_containing(root: Path, needle: bytes) -> list[str]:
    hits = []
    for p in root.rglob("*"):
        if p.is_file() and p.stat().st_size < 200 * 2**20 and needle in p.read_bytes():
            hits.append(str(p))
    return hits


def streamlit_cache_blobs() -> list[bytes]:
    """Pickled contents of every st.cache_data / st.cache_resource entry in this process."""
    from streamlit.runtime.caching import cache_data_api, cache_resource_api

    blobs: list[bytes] = []
    for caches in (cache_data_api._data_caches, cache_resource_api._resource_caches):
        for cache in getattr(caches, "_function_caches", {}).values():
            try:
                blobs.append(pickle.dumps(vars(cache), protocol=pickle.HIGHEST_PROTOCOL))
            except Exception:  # noqa: BLE001 - an unpicklable cache is reported by its repr
                blobs.append(repr(vars(cache)).encode())
    return blobs


def test_a_canary_upload_leaves_no_trace(isolated_disk: dict[str, Path], caplog: pytest.LogCaptureFixture) -> None:
    from streamlit.testing.v1 import AppTest

    from dpsynth.ui_state import STATE_KEY

    canary = f"CANARY_{uuid.uuid4().hex[:12]}"
    rows = "\n".join(f"{20 + i % 50},{canary if i % 9 == 0 else 'plain'}" for i in range(300))
    good = f"age,tag\n{rows}\n".encode()
    bad = f"age,tag\n20,plain\n{canary}_not_a_number,x,extra\n".encode()
    caplog.set_level(logging.DEBUG)

    a = AppTest.from_file(str(APP), default_timeout=120).run()
    a.file_uploader(key="data_upload").set_value((f"{canary}_bad.csv", bad, "text/csv"))
    a.run()
    assert not a.exception
    a.file_uploader(key="data_upload").set_value((f"{canary}.csv", good, "text/csv"))
    a.run()
    assert not a.exception and a.session_state[STATE_KEY].has_data
    for page in ("pages/2_schema.py", "pages/3_privacy.py", "pages/4_release.py"):
        a.switch_page(page).run()
        assert not a.exception
    # the drafted 'tag' categories would publish the canary (a data value): leave the column out, and accept
    # the drafted age bounds (this test is about what sessions leave on disk, not about the schema)
    state = a.session_state[STATE_KEY]
    tag = int(state.schema_table.index[state.schema_table["column"] == "tag"][0])
    a.switch_page("pages/2_schema.py").run()
    a.session_state[state.editor_key] = {"edited_rows": {tag: {"include": False}}, "added_rows": [], "deleted_rows": []}
    a.run()
    state.accept_data_derived = True
    a.switch_page("pages/4_release.py").run()
    a.button(key="release_button_0").click().run()
    assert not a.exception and a.session_state[STATE_KEY].release is not None
    for page in ("pages/5_utility.py", "pages/7_risk.py", "pages/9_ledger.py", "pages/11_releases.py"):
        a.switch_page(page).run()
        assert not a.exception
    del a

    needle = canary.encode()
    for name in ("tmp", "home"):
        assert files_containing(isolated_disk[name], needle) == [], f"the canary was written under {name}"
    ledger_files = files_containing(isolated_disk["ledger"], needle)
    # the ledger and the release archive (its index and the card) record the file name as the dataset's label
    # (a curator-chosen name), never the data
    label = f"{canary}.csv".encode()
    assert [f for f in ledger_files if needle in Path(f).read_bytes().replace(label, b"")] == []
    assert any(_only_in_labels(Path(f), canary) for f in ledger_files if Path(f).name.startswith("ledger"))
    assert not any(canary in r.getMessage() for r in caplog.records), "the canary reached a log record"
    assert not any(needle in blob for blob in streamlit_cache_blobs()), "the canary is in a Streamlit cache"


def _only_in_labels(path: Path, canary: str) -> bool:
    """True if the canary occurs in the ledger only inside dataset labels (the upload's file name)."""
    import sqlite3

    if path.suffix != ".sqlite":
        return False
    con = sqlite3.connect(path)
    try:
        labels = [r[0] for r in con.execute("SELECT label FROM datasets")]
        others = [str(v) for table in ("spends", "meta") for row in con.execute(f"SELECT * FROM {table}") for v in row]
    finally:
        con.close()
    return any(canary in lb for lb in labels) and not any(canary in v for v in others)


def test_another_session_does_not_see_an_upload_file_name_in_the_ledger(isolated_disk: dict[str, Path]) -> None:
    from streamlit.testing.v1 import AppTest

    secret_name = f"patients_of_dr_{uuid.uuid4().hex[:8]}.csv"
    data = ("age,ward\n" + "\n".join(f"{20 + i % 60},{'ab'[i % 2]}" for i in range(200)) + "\n").encode()
    a = AppTest.from_file(str(APP), default_timeout=120).run()
    a.file_uploader(key="data_upload").set_value((secret_name, data, "text/csv"))
    a.run()
    a.switch_page("pages/4_release.py").run()
    a.session_state[STATE_KEY].accept_data_derived = True  # the drafted schema, accepted: this test is about sessions
    a.run()
    a.button(key="release_button_0").click().run()
    assert not a.exception

    b = AppTest.from_file(str(APP), default_timeout=120).run()
    b.switch_page("pages/9_ledger.py").run()
    assert not b.exception
    shown = " ".join(str(e.value) for kind in ("markdown", "caption", "subheader", "info") for e in getattr(b, kind))
    shown += " ".join(e.value.to_csv() for e in b.dataframe)
    assert secret_name not in shown


def test_temporary_files_go_where_the_fixture_points(isolated_disk: dict[str, Path]) -> None:
    """The scan above looks in the right place: Python's temp files land in the isolated directory."""
    with tempfile.NamedTemporaryFile(delete=False) as fh:
        fh.write(b"probe")
    assert Path(fh.name).parent == isolated_disk["tmp"]
    assert os.environ["HOME"] == str(isolated_disk["home"])
    assert files_containing(isolated_disk["tmp"], b"probe") == [fh.name]


def test_reruns_never_draw_fresh_noise_and_a_new_release_is_charged(isolated_disk: dict[str, Path]) -> None:
    """After a release, reruns (page switches, a changed ε, the release page again) show the same bytes and
    spend nothing; only the explicit 'new release' path draws new noise, and it is charged."""
    from streamlit.testing.v1 import AppTest

    from dpsynth.ui_state import STATE_KEY

    data = ("age,ward\n" + "\n".join(f"{20 + i % 60},{'abc'[i % 3]}" for i in range(300)) + "\n").encode()
    at = AppTest.from_file(str(APP), default_timeout=120).run()
    at.file_uploader(key="data_upload").set_value(("wards.csv", data, "text/csv"))
    at.run()
    at.switch_page("pages/4_release.py").run()
    at.session_state[STATE_KEY].accept_data_derived = True  # the drafted schema, accepted: this test is about sessions
    at.run()
    at.button(key="release_button_0").click().run()
    assert not at.exception
    first = dict(at.session_state[STATE_KEY].release_files)
    ledger = Ledger(isolated_disk["ledger"] / "ledger.sqlite", create=False)
    assert len(ledger.spends()) == 1

    at.switch_page("pages/3_privacy.py").run()
    at.number_input(key="privacy_epsilon").set_value(3.0).run()
    for page in ("pages/5_utility.py", "pages/4_release.py", "pages/1_data.py", "pages/4_release.py"):
        at.switch_page(page).run()
        assert not at.exception
    at.run()
    assert at.session_state[STATE_KEY].release_files == first
    assert len(ledger.spends()) == 1

    at.button(key="new_release").click().run()
    buttons = [b.key for b in at.button if b.key and b.key.startswith("release_button_")]
    assert buttons == ["release_button_1"]  # the first button's key is gone: its second click does nothing
    at.button(key="release_button_1").click().run()
    assert not at.exception
    assert len(ledger.spends()) == 2
    assert at.session_state[STATE_KEY].release_files["synthetic.csv"] != first["synthetic.csv"]
