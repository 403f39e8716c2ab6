"""The release archive: every charged release's files and status, kept beside the ledger.

Released outputs are differentially private (post-processing of a DP mechanism's output is DP,
lecture notes on differential privacy, ch. 2), so keeping them costs no privacy; losing one
wastes budget that can never be recovered. The invariant: once ε is charged for a release, the
archive holds either the complete release or a *failed* entry saying why, never nothing, even
if the process is killed at any point. It holds because the entry is written durably
(``pending``) *before* the ledger charge, and a pending entry whose process has died is turned
into a failed one by :meth:`Archive.recover`, which asks the ledger whether the charge happened.

Layout of the archive folder::

    index.sqlite          entries (id, dataset, label, ε, δ, method, status, reason, times) and
                          files (entry, name, order, SHA-256, size); SQLite, synchronous=FULL
    blobs/ab/abcdef…      file contents, content-addressed by SHA-256, written to a temporary
                          name, fsynced, renamed, directory fsynced
    locks/<id>.lock       held (flock) by the process recording the entry while it runs

A release's files are committed all at once: the blobs are made durable first, then one index
transaction lists them and marks the entry complete. A crash in between leaves the entry
pending (recovered as failed) and, at worst, unreferenced blobs.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import socket
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, closing, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpsynth.accounting import Ledger, charging_for, default_ledger_path
from dpsynth.errors import DPSynthError, InputError
from dpsynth.sqlite_tx import immediate_transaction

if TYPE_CHECKING:
    import pandas as pd

    from dpsynth.release import Release
    from dpsynth.schema import Schema

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: liveness falls back to the process id
    fcntl = None  # type: ignore[assignment]

ARCHIVE_ENV = "DPSYNTH_ARCHIVE"
INTERRUPTED_CHARGED = "interrupted after the charge (the process stopped before the release was archived)"
INTERRUPTED_FREE = "interrupted before the charge; nothing spent"
_CHUNK = 1 << 20

_SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entries (
    release_id TEXT PRIMARY KEY, dataset_id TEXT NOT NULL, label TEXT NOT NULL, epsilon REAL NOT NULL,
    delta REAL NOT NULL, method TEXT NOT NULL, created TEXT NOT NULL, status TEXT NOT NULL, reason TEXT NOT NULL,
    finished TEXT, charged INTEGER, host TEXT NOT NULL, pid INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS entries_by_dataset ON entries(dataset_id);
CREATE TABLE IF NOT EXISTS files (
    release_id TEXT NOT NULL REFERENCES entries(release_id), name TEXT NOT NULL, ordinal INTEGER NOT NULL,
    sha256 TEXT NOT NULL, size INTEGER NOT NULL, PRIMARY KEY (release_id, name));
"""
_MAGIC = "dpsynth-archive-v1"


class ArchiveError(DPSynthError):
    """The release archive is unreadable, or an entry or file is missing or damaged."""


@dataclass(frozen=True)
class ArchiveEntry:
    """One release in the archive. ``status`` is ``pending``, ``complete`` or ``failed`` (``reason`` says why);
    ``charged`` is whether the ledger holds a spend for it (None: not known yet)."""

    release_id: str
    dataset_id: str
    label: str
    epsilon: float
    delta: float
    method: str
    created: str
    status: str
    reason: str
    finished: str | None
    charged: bool | None
    files: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


def archive_path_for(ledger_path: str | Path) -> Path:
    """``$DPSYNTH_ARCHIVE``, or the folder ``<ledger name>-archive`` beside the ledger."""
    env = os.environ.get(ARCHIVE_ENV)
    if env:
        return Path(env)
    p = Path(ledger_path)
    return p.parent / f"{p.stem}-archive"


def default_archive_path() -> Path:
    """The archive of the default ledger (:func:`dpsynth.accounting.default_ledger_path`)."""
    return archive_path_for(default_ledger_path())


def new_release_id() -> str:
    """A sortable, unguessable id: UTC time of creation and 32 random bits."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(4)


#: Lock files held by this process, by (archive folder, release id).
_HELD: dict[tuple[str, str], int] = {}
_HELD_LOCK = threading.Lock()


class Archive:
    """The archive folder at ``path`` (created if missing; it holds only DP outputs, so a new empty
    archive resets nothing). ``ledger`` is asked, when an interrupted entry is recovered, whether
    its charge happened."""

    def __init__(self, path: str | Path, *, ledger: Ledger | None = None) -> None:
        self.path = Path(path)
        self.ledger = ledger
        self._index = self.path / "index.sqlite"
        try:
            for sub in ("blobs", "locks"):
                (self.path / sub).mkdir(parents=True, exist_ok=True)
            with self._transaction() as con:
                for stmt in _SCHEMA_SQL.split(";"):
                    if stmt.strip():
                        con.execute(stmt)
                con.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (_MAGIC,))
                row = con.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
            if row[0] != _MAGIC:
                raise ArchiveError(f"{str(self._index)!r} is not a dpsynth release archive.")
        except OSError as exc:
            raise ArchiveError(f"The release archive {str(self.path)!r} cannot be used: {exc.strerror}.") from None

    @classmethod
    def for_ledger(cls, ledger: Ledger) -> Archive:
        """The archive beside ``ledger`` (or at ``$DPSYNTH_ARCHIVE``)."""
        return cls(archive_path_for(ledger.path), ledger=ledger)

    # ------------------------------------------------------------ the life of an entry

    def begin(self, *, dataset_id: str, label: str, epsilon: float, delta: float, method: str,
              release_id: str | None = None) -> ArchiveEntry:
        """Record a release about to be charged, durably, as ``pending``; call before the ledger charge.

        The calling process holds the entry's lock until :meth:`complete` or :meth:`fail`, so
        :meth:`recover` (from any process) leaves it alone while it runs.
        """
        rid = release_id or new_release_id()
        if not rid.replace("-", "").isalnum():
            raise InputError(f"A release id is letters, digits and '-', got {rid!r}.")
        self._lock(rid)
        created = _now()
        try:
            with self._transaction() as con:
                con.execute(
                    "INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', '', NULL, NULL, ?, ?)",
                    (rid, dataset_id, label or dataset_id[:12], float(epsilon), float(delta), method, created,
                     socket.gethostname(), os.getpid()),
                )
        except BaseException:
            self._unlock(rid)
            raise
        return ArchiveEntry(rid, dataset_id, label, float(epsilon), float(delta), method, created, "pending", "",
                            None, None)

    def complete(self, release_id: str, files: Mapping[str, bytes | Path], *, method: str | None = None) -> ArchiveEntry:
        """Store the release's files (bytes, or a path to a file streamed in) and mark it complete.

        The blobs are durable before the one transaction that lists them and flips the status.
        """
        for name in files:
            if not name or "/" in name or "\\" in name or name in (".", ".."):
                raise InputError(f"An archived file name must be a plain file name, got {name!r}.")
        stored = [(name, *self._put(data)) for name, data in files.items()]
        try:
            with self._transaction() as con:
                status = self._status(con, release_id)
                if status != "pending":
                    raise ArchiveError(f"Release {release_id} is {status}; it cannot be completed.")
                con.executemany("INSERT INTO files VALUES (?, ?, ?, ?, ?)",
                                [(release_id, name, i, digest, size) for i, (name, digest, size) in enumerate(stored)])
                con.execute("UPDATE entries SET status = 'complete', finished = ?, charged = 1,"
                            " method = COALESCE(?, method) WHERE release_id = ?", (_now(), method, release_id))
        finally:
            self._unlock(release_id)
        return self.entry(release_id)

    def fail(self, release_id: str, reason: str) -> ArchiveEntry:
        """Mark a pending entry failed, saying why and whether ε was charged (the ledger is asked).

        Only the process recording the entry may fail it while it runs (:class:`ArchiveError` otherwise).
        """
        with _HELD_LOCK:
            held = (str(self.path.absolute()), release_id) in _HELD
        if not held and not self._owner_is_dead(release_id):
            raise ArchiveError(f"Release {release_id} is still being recorded by another process.")
        charged = self._charged(release_id)
        try:
            with self._transaction() as con:
                if self._status(con, release_id) == "pending":
                    con.execute("UPDATE entries SET status = 'failed', reason = ?, finished = ?, charged = ?"
                                " WHERE release_id = ?", (_with_charge(reason, charged), _now(), charged, release_id))
        finally:
            self._unlock(release_id)
        return self.entry(release_id)

    def recover(self) -> list[ArchiveEntry]:
        """Turn every pending entry whose process has died (kill -9, power loss) into a failed one.

        The reason says whether the ledger holds a charge for it. Entries still being recorded by
        a live process (its lock is held) are left alone. Returns the entries recovered.
        """
        with self._read() as con:
            pending = [r[0] for r in con.execute("SELECT release_id FROM entries WHERE status = 'pending'")]
        out = []
        for rid in pending:
            if not self._owner_is_dead(rid):
                continue
            charged = self._charged(rid)
            reason = {True: INTERRUPTED_CHARGED, False: INTERRUPTED_FREE}.get(
                charged, "interrupted; no ledger was given to say whether ε was charged")  # type: ignore[arg-type]
            with self._transaction() as con:
                if self._status(con, rid) == "pending":
                    con.execute("UPDATE entries SET status = 'failed', reason = ?, finished = ?, charged = ?"
                                " WHERE release_id = ?", (reason, _now(), charged, rid))
                    out.append(rid)
            self._release_dead_lock(rid)
        return [self.entry(r) for r in out]

    @contextmanager
    def recording(self, *, dataset_id: str, label: str, epsilon: float, delta: float, method: str,
                  release_id: str | None = None) -> Iterator[Recording]:
        """Record one release: ``pending`` on entry; every ledger charge inside the block is linked to it
        (:func:`dpsynth.accounting.charging_for`); ``rec.complete(files)`` stores it; any exception
        (KeyboardInterrupt included) marks it failed with the error as the reason, then propagates.

        ::

            with archive.recording(dataset_id=ds, label=..., epsilon=1, delta=0, method="histogram") as rec:
                rel = release(df, schema, ledger=ledger, dataset_id=ds, epsilon=1, method="histogram")  # charge carries rec.release_id
                rec.complete(release_archive_files(rel))
        """
        entry = self.begin(dataset_id=dataset_id, label=label, epsilon=epsilon, delta=delta, method=method,
                           release_id=release_id)
        rec = Recording(self, entry)
        try:
            with charging_for(entry.release_id):
                yield rec
        except BaseException as exc:
            if not rec.done:
                self.fail(entry.release_id, _reason(exc))
            raise
        if not rec.done:
            self.fail(entry.release_id, "the release ended without its files being archived")

    # ------------------------------------------------------------ reading

    def list(self, dataset_id: str | None = None, *, recover: bool = True) -> list[ArchiveEntry]:
        """Every entry (or one dataset's), oldest first; interrupted ones are recovered first."""
        if recover:
            self.recover()
        q = "SELECT release_id FROM entries" + (" WHERE dataset_id = ?" if dataset_id is not None else "")
        with self._read() as con:
            ids = [r[0] for r in con.execute(q + " ORDER BY created, rowid", (() if dataset_id is None else (dataset_id,)))]
        return [self.entry(r) for r in ids]

    def entry(self, release_id: str) -> ArchiveEntry:
        """One entry (its status and file names); :class:`ArchiveError` if there is none."""
        with self._read() as con:
            row = con.execute("SELECT release_id, dataset_id, label, epsilon, delta, method, created, status, reason,"
                              " finished, charged FROM entries WHERE release_id = ?", (release_id,)).fetchone()
            if row is None:
                raise ArchiveError(f"No release {release_id!r} in the archive {str(self.path)!r}.")
            names = tuple(r[0] for r in con.execute(
                "SELECT name FROM files WHERE release_id = ? ORDER BY ordinal", (release_id,)))
        charged = None if row[10] is None else bool(row[10])
        return ArchiveEntry(*row[:10], charged, names)

    def get(self, release_id: str) -> dict[str, bytes]:
        """Name → bytes of a complete release's files, each checked against its SHA-256."""
        return {name: self._blob(digest, size).read_bytes() for name, digest, size in self._files(release_id)}

    def export(self, release_id: str, out_dir: str | Path) -> list[Path]:
        """Copy a complete release's files into ``out_dir`` (streamed, checked); returns the paths written."""
        out = Path(out_dir)
        files = self._files(release_id)
        if out.exists() and not out.is_dir():
            raise InputError(f"The output folder {str(out)!r} is a file; give a folder name.")
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for name, digest, size in files:
            target = out / name
            shutil.copyfile(self._blob(digest, size), target)
            written.append(target)
        return written

    def zip(self, release_id: str, names: list[str] | None = None) -> bytes:
        """The release's files (or ``names`` of them, in that order) in one zip; the same bytes every time."""
        from dpsynth.release import zip_files

        files = {n: (d, s) for n, d, s in self._files(release_id)}
        return zip_files({name: self._blob(*files[name]).read_bytes()
                          for name in (names if names is not None else list(files))})

    # ------------------------------------------------------------ internals

    def _files(self, release_id: str) -> list[tuple[str, str, int]]:
        entry = self.entry(release_id)
        if entry.status != "complete":
            raise ArchiveError(f"Release {release_id} is {entry.status}" + (f": {entry.reason}" if entry.reason else "")
                               + "; it has no files.")
        with self._read() as con:
            return con.execute("SELECT name, sha256, size FROM files WHERE release_id = ? ORDER BY ordinal",
                               (release_id,)).fetchall()

    def _blob(self, digest: str, size: int) -> Path:
        p = self.path / "blobs" / digest[:2] / digest
        try:
            actual = p.stat().st_size
        except OSError:
            raise ArchiveError(f"An archived file ({digest[:12]}) is missing from {str(self.path)!r}.") from None
        if actual != size or _sha256_file(p) != digest:
            raise ArchiveError(f"An archived file ({digest[:12]}) in {str(self.path)!r} is damaged.")
        return p

    def _put(self, data: bytes | Path) -> tuple[str, int]:
        """Write one blob durably under its SHA-256; returns (digest, size)."""
        tmp = self.path / "blobs" / f".{secrets.token_hex(8)}.tmp"
        h = hashlib.sha256()
        size = 0
        try:
            with open(tmp, "wb") as out:
                if isinstance(data, (bytes, bytearray, memoryview)):
                    h.update(data)
                    out.write(data)
                    size = len(data)
                else:
                    with open(data, "rb") as src:
                        while chunk := src.read(_CHUNK):
                            h.update(chunk)
                            out.write(chunk)
                            size += len(chunk)
                out.flush()
                os.fsync(out.fileno())
            digest = h.hexdigest()
            folder = self.path / "blobs" / digest[:2]
            folder.mkdir(exist_ok=True)
            os.replace(tmp, folder / digest)  # same content under the same name: a concurrent writer is harmless
            _fsync_dir(folder)
            _fsync_dir(folder.parent)
            return digest, size
        finally:
            tmp.unlink(missing_ok=True)

    def _charged(self, release_id: str) -> bool | None:
        if self.ledger is None:
            return None
        return bool(self.ledger.spends_for_release(release_id))

    @staticmethod
    def _status(con: sqlite3.Connection, release_id: str) -> str:
        row = con.execute("SELECT status FROM entries WHERE release_id = ?", (release_id,)).fetchone()
        if row is None:
            raise ArchiveError(f"No release {release_id!r} in the archive.")
        return row[0]

    def _lock_path(self, release_id: str) -> Path:
        return self.path / "locks" / f"{release_id}.lock"

    def _lock(self, release_id: str) -> None:
        fd = os.open(self._lock_path(release_id), os.O_RDWR | os.O_CREAT, 0o600)
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, f"{socket.gethostname()} {os.getpid()}".encode())
        with _HELD_LOCK:
            _HELD[(str(self.path.absolute()), release_id)] = fd

    def _unlock(self, release_id: str) -> None:
        with _HELD_LOCK:
            fd = _HELD.pop((str(self.path.absolute()), release_id), None)
        if fd is not None:
            self._lock_path(release_id).unlink(missing_ok=True)  # before closing: nobody sees a free, stale lock
            os.close(fd)

    def _owner_is_dead(self, release_id: str) -> bool:
        with _HELD_LOCK:
            if (str(self.path.absolute()), release_id) in _HELD:
                return False
        try:
            fd = os.open(self._lock_path(release_id), os.O_RDWR)
        except FileNotFoundError:
            return True  # the lock is made before the entry and removed after it leaves 'pending'
        try:
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return False
                return True
            host, _, pid = os.read(fd, 200).decode(errors="replace").partition(" ")  # pragma: no cover
            return host == socket.gethostname() and not _pid_alive(int(pid or 0))  # pragma: no cover
        finally:
            os.close(fd)

    def _release_dead_lock(self, release_id: str) -> None:
        self._lock_path(release_id).unlink(missing_ok=True)

    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self._index, timeout=30.0, isolation_level=None)
        con.execute("PRAGMA synchronous = FULL")
        return con

    def _transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        return immediate_transaction(self._connect, ArchiveError, f"The release archive {str(self._index)!r}", attempts=200)

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        try:
            with closing(self._connect()) as con:
                yield con
        except sqlite3.DatabaseError as exc:
            raise ArchiveError(f"The release archive {str(self._index)!r} is unreadable: {exc}.") from None


@dataclass
class Recording:
    """An entry being recorded (see :meth:`Archive.recording`)."""

    archive: Archive
    entry: ArchiveEntry
    done: bool = False

    @property
    def release_id(self) -> str:
        return self.entry.release_id

    def complete(self, files: Mapping[str, bytes | Path], *, method: str | None = None) -> ArchiveEntry:
        """Store the files and mark the release complete."""
        out = self.archive.complete(self.release_id, files, method=method)
        self.done = True
        return out

    def fail(self, reason: str) -> ArchiveEntry:
        """Mark the release failed, with the reason."""
        out = self.archive.fail(self.release_id, reason)
        self.done = True
        return out


def resample_archived(archive: Archive, release_id: str, rows: int, *, rng: Any) -> bytes:
    """``rows`` new synthetic rows (the writer's CSV bytes) from an archived release's noisy histogram or model:
    post-processing of released outputs, so no ε. ``rng`` should be :func:`dpsynth.noise.secure_rng`."""
    from dpsynth.randomness import post_processing_seed
    from dpsynth.release import Release
    from dpsynth.synthesis import check_rows
    from dpsynth.writer import synthetic_bytes

    if int(rows) != rows or rows < 0:
        raise InputError(f"The number of synthetic rows must be a whole number ≥ 0, got {rows!r}.")
    check_rows(int(rows))
    rel = Release.from_files(archive.get(release_id))
    return synthetic_bytes(rel.sampler(int(rows), post_processing_seed(rng)), rel.schema, values=rel.values)


def release_archive_files(rel: Release, synthetic: bytes | Path | None = None) -> dict[str, bytes | Path]:
    """The files archived for a :class:`~dpsynth.release.Release`: every released file
    (:func:`dpsynth.artifacts.release_files`) and ``schema.json``. ``synthetic`` replaces
    ``synthetic.csv`` when the rows were streamed to a file (the engine path)."""
    from dpsynth.artifacts import release_files

    files: dict[str, bytes | Path] = dict(release_files(rel))
    if synthetic is not None:
        files["synthetic.csv"] = synthetic
    files["schema.json"] = rel.schema.to_json().encode("utf-8")
    return files


def archived_release(
    df: pd.DataFrame,
    schema: Schema,
    *,
    ledger: Ledger,
    archive: Archive | None = None,
    dataset_id: str | None = None,
    dataset_label: str = "",
    epsilon: float,
    delta: float = 0.0,
    method: str = "histogram",
    run: Callable[..., Release] | None = None,
    **kwargs: Any,
) -> tuple[Release, ArchiveEntry]:
    """:func:`dpsynth.release.release` (or ``run``, same signature) recorded in the archive.

    The entry is pending before the charge, the charge carries its id, and the release's files
    are archived before this returns; an error marks the entry failed. Returns (release, entry).
    """
    from dpsynth.pipeline import dataset_identity
    from dpsynth.release import release

    archive = archive or Archive.for_ledger(ledger)
    if archive.ledger is None:
        archive.ledger = ledger
    ds = dataset_id or dataset_identity(df)
    with archive.recording(dataset_id=ds, label=dataset_label, epsilon=epsilon, delta=delta, method=method) as rec:
        rel = (run or release)(df, schema, ledger=ledger, dataset_id=ds, dataset_label=dataset_label,
                               epsilon=epsilon, delta=delta, method=method, **kwargs)
        entry = rec.complete(release_archive_files(rel), method=rel.card["method"]["name"])
    return rel, entry


def _reason(exc: BaseException) -> str:
    """One line saying why a release failed (a budget refusal: what ran out)."""
    from dpsynth.errors import BudgetExceededError

    if isinstance(exc, BudgetExceededError):
        what = " and ".join(exc.exhausted) or "budget"
        return f"refused by the ledger: not enough {what} left (requested {exc.requested}; remaining {exc.remaining})"
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:2000]


def _with_charge(reason: str, charged: bool | None) -> str:
    if charged is None:
        return reason
    return f"{reason} ({'ε was charged' if charged else 'nothing spent'})"


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _pid_alive(pid: int) -> bool:  # pragma: no cover - used only without fcntl
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")
