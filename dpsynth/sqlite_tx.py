"""One write transaction on a SQLite file shared by processes: the privacy ledger and the release archive.

``BEGIN IMMEDIATE`` takes the write lock up front (retried with short sleeps while another process
holds it), so a read-check-write inside the block is atomic across processes; the block commits
on success and rolls back on any exception. Every SQLite failure becomes the caller's own error
type with a plain sentence naming the file.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def immediate_transaction(connect: Callable[[], sqlite3.Connection], error: type[Exception], name: str,
                          attempts: int = 100) -> Iterator[sqlite3.Connection]:
    """Open with ``connect``, hold the write lock for the block, commit or roll back; ``name`` is
    how messages call the file (e.g. "The privacy ledger '/x/ledger.db'")."""
    try:
        con = connect()
    except sqlite3.DatabaseError as exc:
        raise error(f"{name} could not be opened: {exc}.") from None
    try:
        for attempt in range(attempts):
            try:
                con.execute("BEGIN IMMEDIATE")
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or attempt == attempts - 1:
                    raise
                time.sleep(0.01 * (1 + attempt % 10))
        try:
            yield con
            con.execute("COMMIT")
        except BaseException:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise
    except sqlite3.DatabaseError as exc:
        raise error(f"{name} could not be written: {exc}.") from None
    finally:
        con.close()
