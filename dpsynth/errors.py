"""Errors: the user's (bad input, exhausted budget) versus the library's (a bug).

User errors carry a message a curator can act on, naming the column, row or value at fault.
The CLI turns them into one line on stderr and exit status 2; the dashboard shows them with
``st.error``. Anything else escaping the library is a bug.
"""

from __future__ import annotations


class DPSynthError(Exception):
    """Base class of every error dpsynth raises on purpose."""


class InputError(DPSynthError, ValueError):
    """The curator's input (a file, a schema, a parameter) cannot be used as given."""


class TooLargeForMemoryError(InputError):
    """A file past the in-memory reader's limits (rows, decoded size) that an out-of-core engine can count: the
    command line's automatic engine then counts it on DuckDB, as it does files over 50 MB, so a table's size never
    decides between a release and a refusal."""


class BudgetExceededError(DPSynthError):
    """A spend would take a dataset past its total privacy budget; nothing was spent."""

    def __init__(self, requested: str, remaining: str, dataset: str, *, exhausted: tuple[str, ...] = (),
                 advice: str = "") -> None:
        self.requested = requested
        self.remaining = remaining
        self.dataset = dataset
        self.exhausted = exhausted  # which of "ε", "δ" does not cover the request
        super().__init__(
            "Cannot release without exceeding the privacy budget of this dataset.\n"
            f"Requested: {requested}\nRemaining: {remaining}" + (f"\n{advice}" if advice else "")
        )


class LedgerError(DPSynthError):
    """The privacy ledger is missing, corrupt or unwritable; it is never reset silently."""


class InternalError(AssertionError):
    """An invariant of dpsynth itself was violated: this is a bug, please report it."""
