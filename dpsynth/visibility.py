"""Who sees which datasets in the ledger: one pure rule shared by the Ledger page and its export.

Budgets are per dataset and shared by everyone who releases it (the privacy loss of a table is
the table's, whoever spends it), but what the ledger says about a dataset (its name, fingerprint,
spend times and purposes, e.g. "schema estimate for column 'hiv_status'") is itself information
about someone's data. So:

- without login (one local user, ``user is None``) everything is shown;
- with login, a session sees the datasets it has loaded itself, and an administrator (an email
  in the deployment's admin list) sees all of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def is_admin(user: str | None, admins: Iterable[str]) -> bool:
    """True for the local user (no login) and for an email in ``admins`` (compared case-insensitively)."""
    if user is None:
        return True
    email = user.strip().casefold()
    return bool(email) and email in {a.strip().casefold() for a in admins if isinstance(a, str)}


def visible_dataset_ids(user: str | None, admins: Iterable[str], loaded: Iterable[str | None],
                        dataset_ids: Iterable[str]) -> set[str]:
    """The dataset ids ``user`` may see among ``dataset_ids``: all for the local user or an admin,
    else those this session has ``loaded``."""
    ids = set(dataset_ids)
    if is_admin(user, admins):
        return ids
    return ids & {d for d in loaded if d}


def visible_rows(user: str | None, admins: Iterable[str], loaded: Iterable[str | None], rows: Sequence[T],
                 *, key: str = "dataset_id") -> list[T]:
    """The rows (dicts or objects with a ``dataset_id``) about datasets ``user`` may see, in order."""
    loaded = list(loaded)

    def ds(row: Any) -> str:
        return row[key] if isinstance(row, Mapping) else getattr(row, key)

    allowed = visible_dataset_ids(user, admins, loaded, [ds(r) for r in rows])
    return [r for r in rows if ds(r) in allowed]


def viewer_from(secrets: Any, user: Any) -> tuple[str | None, list[str]]:
    """(the signed-in email, or None when no login is configured; the deployment's admin emails), from the
    dashboard's secrets (``st.secrets``: an ``[auth]`` section means login is on; ``[dpsynth] admins``) and
    its user object (``st.user``). Pure: the pages pass both in."""
    try:
        configured = "auth" in secrets
        admins = [str(a) for a in secrets.get("dpsynth", {}).get("admins", [])]
    except Exception:  # noqa: BLE001 - no secrets file at all: a single-user (local) deployment
        return None, []
    if not configured:
        return None, admins
    email = user.get("email") if getattr(user, "is_logged_in", False) else None
    return str(email or ""), admins
