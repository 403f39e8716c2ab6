"""Privacy budgets, composition, and the durable ledger of what each dataset has spent.

Composition (the Algorithmic Foundations of DP slides): running mechanisms that are (ε₁, δ₁)-, …, (ε_k, δ_k)-DP on the same
data is (Σεᵢ, Σδᵢ)-DP (sequential composition, what the ledger enforces). Mechanisms on
disjoint cells compose in parallel, which is why a whole noisy histogram costs ε, not k·ε.
Advanced composition (the Algorithmic Foundations of DP slides, Thm 3.20) is offered as a calculator.

The ledger is the one piece of state that must never under-count. A spend is committed in
an SQLite ``BEGIN IMMEDIATE`` transaction with ``synchronous=FULL`` *before* any noise is drawn;
the budget check and the insert happen in that one transaction, so concurrent releases cannot
both pass the check. A crash after the commit leaves the spend recorded (over-counting is the
safe failure). A missing ledger is only created when asked; a corrupt one raises
:class:`LedgerError` and is never reset.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, closing, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dpsynth.errors import BudgetExceededError, InputError, LedgerError
from dpsynth.sqlite_tx import immediate_transaction

# Float sums of many spends (0.1 + 0.2 …) must not refuse a release that fits exactly.
_SLACK = 1e-9


@dataclass(frozen=True)
class PrivacyBudget:
    """An (ε, δ) amount; adds and subtracts componentwise (basic composition)."""

    epsilon: float
    delta: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.epsilon) and self.epsilon >= 0):
            raise InputError(f"ε must be a finite number ≥ 0, got {self.epsilon!r}.")
        if not (0.0 <= self.delta <= 1.0):
            raise InputError(f"δ must be in [0, 1], got {self.delta!r}.")

    def __add__(self, other: PrivacyBudget) -> PrivacyBudget:
        return PrivacyBudget(self.epsilon + other.epsilon, min(1.0, self.delta + other.delta))

    def __sub__(self, other: PrivacyBudget) -> PrivacyBudget:
        return PrivacyBudget(max(0.0, self.epsilon - other.epsilon), max(0.0, self.delta - other.delta))

    def __truediv__(self, k: float) -> PrivacyBudget:
        return PrivacyBudget(self.epsilon / k, self.delta / k)

    def covers(self, other: PrivacyBudget) -> bool:
        """True if ``other`` fits within this budget."""
        return other.epsilon <= self.epsilon + _SLACK and other.delta <= self.delta + _SLACK * 1e-6

    def __str__(self) -> str:
        return f"ε = {self.epsilon:g}" + (f", δ = {self.delta:g}" if self.delta else "")


def advanced_composition(epsilon: float, delta: float, k: int, delta_prime: float) -> PrivacyBudget:
    """k-fold adaptive composition of (ε, δ)-DP mechanisms (the Algorithmic Foundations of DP slides, Thm 3.20).

    Result: (ε', kδ + δ')-DP with ε' = sqrt(2k ln(1/δ')) ε + k ε (e^ε − 1). Returns the smaller of
    this and basic composition's kε.
    """
    if k < 1 or not 0 < delta_prime < 1:
        raise InputError("Advanced composition needs k ≥ 1 and 0 < δ′ < 1.")
    # above ε = 1 the k ε (e^ε − 1) term alone exceeds basic composition's k ε (and e^ε overflows past 709)
    eps_adv = (math.sqrt(2 * k * math.log(1 / delta_prime)) * epsilon + k * epsilon * math.expm1(epsilon)
               if epsilon < 1 else math.inf)
    if eps_adv < k * epsilon:
        return PrivacyBudget(eps_adv, min(1.0, k * delta + delta_prime))
    return PrivacyBudget(k * epsilon, min(1.0, k * delta))


@dataclass(frozen=True)
class Spend:
    """One recorded spend."""

    spend_id: str
    dataset_id: str
    time: str
    mechanism: str
    epsilon: float
    delta: float
    purpose: str
    release_id: str | None = None


@dataclass(frozen=True)
class BudgetEvent:
    """One change of a dataset's total budget: when, from what (None at registration), to what, and why."""

    event_id: str
    dataset_id: str
    time: str
    old_epsilon: float | None
    old_delta: float | None
    new_epsilon: float
    new_delta: float
    reason: str


#: The release a charge belongs to when the caller does not name it (see :func:`charging_for`).
_RELEASE_ID: ContextVar[str | None] = ContextVar("dpsynth_release_id", default=None)


@contextmanager
def charging_for(release_id: str) -> Iterator[None]:
    """Within this block (this thread or task), every :meth:`Ledger.charge` without an explicit
    ``release_id`` is linked to ``release_id``: how an archived release finds its spend."""
    token = _RELEASE_ID.set(release_id)
    try:
        yield
    finally:
        _RELEASE_ID.reset(token)


_SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS datasets (
    dataset_id TEXT PRIMARY KEY, label TEXT NOT NULL,
    total_epsilon REAL NOT NULL, total_delta REAL NOT NULL, created TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS spends (
    spend_id TEXT PRIMARY KEY, dataset_id TEXT NOT NULL REFERENCES datasets(dataset_id),
    time TEXT NOT NULL, mechanism TEXT NOT NULL, epsilon REAL NOT NULL, delta REAL NOT NULL,
    purpose TEXT NOT NULL);
""" + """
CREATE TABLE IF NOT EXISTS spend_releases (
    spend_id TEXT PRIMARY KEY REFERENCES spends(spend_id), release_id TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS spend_releases_by_release ON spend_releases(release_id);
CREATE TABLE IF NOT EXISTS budget_events (
    event_id TEXT PRIMARY KEY, dataset_id TEXT NOT NULL REFERENCES datasets(dataset_id), time TEXT NOT NULL,
    old_epsilon REAL, old_delta REAL, new_epsilon REAL NOT NULL, new_delta REAL NOT NULL, reason TEXT NOT NULL);
"""
#: Tables added after the first format; a ledger without them gets them when opened (same format tag).
_ADDED_TABLES = ("spend_releases", "budget_events")
_MAGIC = "dpsynth-ledger-v1"


class Ledger:
    """An SQLite file recording every spend per dataset, enforcing each dataset's total budget.

    The file is created only by this constructor (with ``create=True``), atomically: the tables are
    written to a temporary file that is then hard-linked into place, so the path either does not
    exist or holds a complete ledger. Every other access opens it read-write *without* creating
    it, so a ledger deleted or moved while in use is reported, not silently recreated empty; and a
    ledger this process has already opened is never recreated, even with ``create=True``.
    """

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        self.path = Path(path)
        self.created = False
        key = _key(self.path)
        if not self.path.exists():
            if not create:
                raise LedgerError(f"The privacy ledger {str(self.path)!r} does not exist.")
            if key not in _OPENED:
                self.created = _create(self.path)
            # Looked at again: another thread of this process may have created and opened the ledger
            # since the first look; only a ledger still missing has disappeared.
            elif not self.path.exists():
                raise LedgerError(
                    f"The privacy ledger {str(self.path)!r} was in use and has disappeared; it was not recreated"
                    " (an empty ledger would reset every budget). Restore it from a backup before releasing anything."
                )
        try:
            size = self.path.stat().st_size
        except OSError as exc:
            raise LedgerError(f"The privacy ledger {str(self.path)!r} cannot be read: {exc.strerror}.") from None
        if size == 0:
            raise LedgerError(
                f"The privacy ledger {str(self.path)!r} is empty (0 bytes), perhaps truncated; it was not reset."
                " Restore it from a backup before releasing anything."
            )
        try:
            with closing(self._connect()) as con:
                row = con.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
                if not row or row[0] != _MAGIC:
                    raise LedgerError(f"{str(self.path)!r} is not a dpsynth ledger.")
                ok = con.execute("PRAGMA quick_check").fetchone()
                if not ok or ok[0] != "ok":
                    raise LedgerError(f"The privacy ledger {str(self.path)!r} is corrupt: {ok}.")
                # NaN compares false, so it is caught too: a spend that is not ≥ 0 would give budget back
                bad = con.execute("SELECT COUNT(*) FROM spends WHERE NOT (epsilon >= 0 AND delta >= 0)").fetchone()[0]
                if bad:
                    raise LedgerError(
                        f"The privacy ledger {str(self.path)!r} has {bad} spend(s) with a negative or missing ε or δ;"
                        " it has been altered. Restore it from a backup before releasing anything."
                    )
                have = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            raise LedgerError(
                f"The privacy ledger {str(self.path)!r} is corrupt or unreadable ({exc}); it was not"
                " reset. Restore it from a backup before releasing anything."
            ) from None
        if not set(_ADDED_TABLES) <= have:
            with self._transaction() as con:  # a ledger of an earlier version: add the new (empty) tables
                for stmt in _SCHEMA_SQL.split(";"):
                    if stmt.strip():
                        con.execute(stmt)
        _OPENED.add(key)

    def _connect(self) -> sqlite3.Connection:
        # mode=rw: never create the file here (sqlite3.connect would make an empty one)
        con = sqlite3.connect(self.path.absolute().as_uri() + "?mode=rw", uri=True, timeout=30.0, isolation_level=None)
        con.execute("PRAGMA synchronous = FULL")
        con.execute("PRAGMA foreign_keys = ON")
        return con

    def _transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        return immediate_transaction(self._connect, LedgerError, f"The privacy ledger {str(self.path)!r}", attempts=100)

    def register(self, dataset_id: str, total: PrivacyBudget, label: str = "") -> None:
        """Record a dataset's total budget if it is new (an existing budget is left unchanged)."""
        now = _now()
        with self._transaction() as con:
            cur = con.execute(
                "INSERT OR IGNORE INTO datasets VALUES (?, ?, ?, ?, ?)",
                (dataset_id, label or dataset_id[:12], total.epsilon, total.delta, now),
            )
            if cur.rowcount == 1:
                con.execute("INSERT INTO budget_events VALUES (?, ?, ?, NULL, NULL, ?, ?, ?)",
                            (uuid.uuid4().hex, dataset_id, now, total.epsilon, total.delta,
                             "first total, set when the dataset was registered"))

    def set_total(self, dataset_id: str, total: PrivacyBudget, *, reason: str) -> BudgetEvent:
        """Change a registered dataset's total budget (a curator's explicit decision), recorded as an event.

        ``reason`` is required (the curator's words, kept in the ledger). A total below what the
        dataset has already spent is refused: spent privacy loss cannot be taken back.
        """
        reason = " ".join(str(reason or "").split())
        if not reason:
            raise InputError("Say why the total budget changes (a reason is required and kept in the ledger).")
        with self._transaction() as con:
            row = con.execute(
                "SELECT total_epsilon, total_delta FROM datasets WHERE dataset_id = ?", (dataset_id,)
            ).fetchone()
            if row is None:
                raise InputError(f"Dataset {dataset_id[:12]!r} is not in the ledger.")
            spent = _spent(con, dataset_id)
            below = [f"{name} = {new:g} is below the {name} already spent ({old:g})"
                     for name, new, old in (("ε", total.epsilon, spent.epsilon), ("δ", total.delta, spent.delta))
                     if new < old - (_SLACK if name == "ε" else _SLACK * 1e-6)]
            if below:
                raise InputError(f"Refused: a total {' and '.join(below)}; spent privacy loss cannot be taken back.")
            event = BudgetEvent(uuid.uuid4().hex, dataset_id, _now(), row[0], row[1], total.epsilon, total.delta,
                                reason)
            con.execute("UPDATE datasets SET total_epsilon = ?, total_delta = ? WHERE dataset_id = ?",
                        (total.epsilon, total.delta, dataset_id))
            con.execute("INSERT INTO budget_events VALUES (?, ?, ?, ?, ?, ?, ?, ?)", dataclasses.astuple(event))
        return event

    def budget_events(self, dataset_id: str | None = None) -> list[BudgetEvent]:
        """Every change of a total budget (registration included), oldest first, optionally for one dataset."""
        q = "SELECT * FROM budget_events"
        args: tuple[Any, ...] = ()
        if dataset_id is not None:
            q += " WHERE dataset_id = ?"
            args = (dataset_id,)
        with self._read() as con:
            return [BudgetEvent(*r) for r in con.execute(q + " ORDER BY time, rowid", args).fetchall()]

    def total(self, dataset_id: str) -> PrivacyBudget | None:
        """The dataset's total budget, or None if it was never registered."""
        with self._read() as con:
            row = con.execute(
                "SELECT total_epsilon, total_delta FROM datasets WHERE dataset_id = ?", (dataset_id,)
            ).fetchone()
        return PrivacyBudget(row[0], row[1]) if row else None

    def spent(self, dataset_id: str) -> PrivacyBudget:
        """Sum of all spends on the dataset (sequential composition)."""
        with self._read() as con:
            return _spent(con, dataset_id)

    def remaining(self, dataset_id: str) -> PrivacyBudget | None:
        """Total minus spent, or None if the dataset is not registered."""
        total = self.total(dataset_id)
        return None if total is None else total - self.spent(dataset_id)

    def charge(self, dataset_id: str, amount: PrivacyBudget, *, mechanism: str, purpose: str,
               release_id: str | None = None) -> Spend:
        """Check the budget and record the spend in one durable transaction; raise if it does not fit.

        Call this *before* drawing any noise. On :class:`BudgetExceededError` nothing is recorded.
        ``release_id`` (default: the one set by :func:`charging_for`) links the spend to its entry
        in the release archive, in the same transaction.
        """
        release_id = release_id if release_id is not None else _RELEASE_ID.get()
        spend = Spend(uuid.uuid4().hex, dataset_id, _now(), mechanism, amount.epsilon, amount.delta, purpose,
                      release_id)
        with self._transaction() as con:
            row = con.execute(
                "SELECT total_epsilon, total_delta FROM datasets WHERE dataset_id = ?", (dataset_id,)
            ).fetchone()
            if row is None:
                raise InputError(f"Dataset {dataset_id[:12]!r} has no budget in the ledger; register it first.")
            total = PrivacyBudget(row[0], row[1])
            remaining = total - _spent(con, dataset_id)
            if not remaining.covers(amount):
                raise _refusal(amount, remaining, dataset_id)
            con.execute(
                "INSERT INTO spends VALUES (?, ?, ?, ?, ?, ?, ?)",
                (spend.spend_id, dataset_id, spend.time, mechanism, amount.epsilon, amount.delta, purpose),
            )
            if release_id is not None:
                con.execute("INSERT INTO spend_releases VALUES (?, ?)", (spend.spend_id, release_id))
        return spend

    def spends_for_release(self, release_id: str) -> list[Spend]:
        """The spends linked to one archived release (empty: nothing was charged for it)."""
        return self._spends("WHERE r.release_id = ?", (release_id,))

    def spends(self, dataset_id: str | None = None) -> list[Spend]:
        """All spends, oldest first, optionally for one dataset."""
        if dataset_id is None:
            return self._spends("", ())
        return self._spends("WHERE s.dataset_id = ?", (dataset_id,))

    def _spends(self, where: str, args: tuple[Any, ...]) -> list[Spend]:
        q = ("SELECT s.spend_id, s.dataset_id, s.time, s.mechanism, s.epsilon, s.delta, s.purpose, r.release_id"
             " FROM spends s LEFT JOIN spend_releases r ON r.spend_id = s.spend_id ")
        with self._read() as con:
            rows = con.execute(q + where + " ORDER BY s.time, s.rowid", args).fetchall()
        return [Spend(*r) for r in rows]

    def datasets(self) -> list[dict[str, Any]]:
        """Each registered dataset with its total, spent and remaining budget."""
        with self._read() as con:
            rows = con.execute("SELECT dataset_id, label, total_epsilon, total_delta, created FROM datasets").fetchall()
            out = []
            for ds, label, te, td, created in rows:
                sp = _spent(con, ds)
                out.append({
                    "dataset_id": ds, "label": label, "created": created,
                    "total_epsilon": te, "total_delta": td,
                    "spent_epsilon": sp.epsilon, "spent_delta": sp.delta,
                    "remaining_epsilon": max(0.0, te - sp.epsilon), "remaining_delta": max(0.0, td - sp.delta),
                })
        return out

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        try:
            con = self._connect()
        except sqlite3.DatabaseError as exc:
            raise LedgerError(f"The privacy ledger {str(self.path)!r} is unreadable: {exc}.") from None
        try:
            yield con
        except sqlite3.DatabaseError as exc:
            raise LedgerError(f"The privacy ledger {str(self.path)!r} is corrupt or unreadable: {exc}.") from None
        finally:
            con.close()


#: Ledgers opened by this process: one that disappears is reported, never recreated.
_OPENED: set[str] = set()


def _key(path: Path) -> str:
    return os.path.normcase(os.path.abspath(path))


def _create(path: Path) -> bool:
    """Create a complete, empty ledger at ``path`` atomically; False if another process was first.

    The tables are written and fsynced in a temporary file beside ``path``, which is then
    hard-linked to ``path`` (``link`` fails if the path exists, so a ledger is never overwritten).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.creating")
    try:
        with closing(sqlite3.connect(tmp, isolation_level=None)) as con:
            con.execute("PRAGMA synchronous = FULL")
            con.executescript("BEGIN;" + _SCHEMA_SQL + "COMMIT;")
            con.execute("INSERT INTO meta VALUES ('format', ?)", (_MAGIC,))
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
            created = True
        except FileExistsError:
            created = False
        except OSError:
            # no hard links on this file system: exclusive create, then copy (not atomic, but never overwrites)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                return False
            with os.fdopen(fd, "wb") as out:
                out.write(tmp.read_bytes())
                out.flush()
                os.fsync(out.fileno())
            created = True
        _fsync_dir(path.parent)
        return created
    except sqlite3.DatabaseError as exc:
        raise LedgerError(f"A new privacy ledger could not be created at {str(path)!r}: {exc}.") from None
    finally:
        tmp.unlink(missing_ok=True)


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


def default_ledger_path() -> Path:
    """``$DPSYNTH_LEDGER`` or ``~/.dpsynth/ledger.sqlite``."""
    env = os.environ.get("DPSYNTH_LEDGER")
    return Path(env) if env else Path.home() / ".dpsynth" / "ledger.sqlite"


def _refusal(amount: PrivacyBudget, remaining: PrivacyBudget, dataset_id: str) -> BudgetExceededError:
    """A refusal that names what is exhausted (ε, δ or both), both remaining values, and how to proceed."""
    short = [name for name, fits in (
        ("ε", amount.epsilon <= remaining.epsilon + _SLACK), ("δ", amount.delta <= remaining.delta + _SLACK * 1e-6))
        if not fits]
    what = " and ".join(short)
    smaller = {"ε": "a smaller ε", "δ": "a smaller δ (δ = 0 uses Laplace noise)"}
    return BudgetExceededError(
        f"ε = {amount.epsilon:g}, δ = {amount.delta:g}",
        f"ε = {remaining.epsilon:g}, δ = {remaining.delta:g}",
        dataset_id,
        exhausted=tuple(short),
        advice=(f"Not enough {what} left. To proceed, ask for {' and '.join(smaller[n] for n in short)}, or raise"
                f" this dataset's total {what} with a reason (Ledger page, or"
                " `python -m dpsynth ledger set-total`)."),
    )


def _spent(con: sqlite3.Connection, dataset_id: str) -> PrivacyBudget:
    row = con.execute(
        "SELECT COALESCE(SUM(epsilon), 0), COALESCE(SUM(delta), 0) FROM spends WHERE dataset_id = ?", (dataset_id,)
    ).fetchone()
    return PrivacyBudget(float(row[0]), min(1.0, float(row[1])))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")
