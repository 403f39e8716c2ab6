"""Releases page: every release kept in the release archive — after a reload, another session or a server restart."""

from __future__ import annotations

import streamlit as st

from dpsynth import noise
from dpsynth.archive import Archive, resample_archived
from dpsynth.card import card_markdown
from dpsynth.errors import DPSynthError
from dpsynth.release import Release
from dpsynth.ui_state import AppState, get_state, show_errors
from dpsynth.visibility import is_admin, viewer_from, visible_rows


def entries(state: AppState) -> tuple[list, bool]:  # noqa: ANN001 - ArchiveEntry rows
    """The archive entries this viewer may see (the library's visibility rule), and whether they are an admin."""
    archive = Archive.for_ledger(state.ledger())
    user, admins = viewer_from(st.secrets, st.user)
    return visible_rows(user, admins, state.loaded_datasets, archive.list()), is_admin(user, admins)


def show_entry(state: AppState, archive: Archive, entry) -> None:  # noqa: ANN001 - an ArchiveEntry
    """One release: its card, the zip (the same bytes as when it was made), re-sampling, opening it here."""
    if entry.status != "complete":
        st.warning(f"Status: {entry.status}. {entry.reason or ''}")
        return
    key = entry.release_id
    cache = state.analyses.setdefault("archived", {})
    if key not in cache:
        cache[key] = Release.from_files(archive.get(entry.release_id))
    rel: Release = cache[key]
    if st.toggle("Show the release card", key=f"card_{key}"):
        st.markdown(card_markdown(rel.card))
    c1, c2 = st.columns(2)
    c1.download_button("Download the release (.zip)", data=rel.zip(), file_name=f"dpsynth_release_{key}.zip",
                       mime="application/zip", key=f"zip_{key}", type="primary")
    same = state.dataset_id is not None and entry.dataset_id == state.dataset_id
    if c2.button("Open it on the Utility and Risk pages", key=f"open_{key}", disabled=not same,
                 help=None if same else "Load the same table on the Data page first: the comparisons need it."):
        state.clear_release()
        state.release = rel
        state.release_files = rel.files()
        state.release_zip = rel.zip()
        st.switch_page("pages/5_utility.py")
    with st.form(f"resample_{key}"):
        rows = st.number_input("New synthetic rows from the same release (no privacy budget used)", min_value=1,
                               max_value=5_000_000, value=max(1, rel.rows), step=1000, key=f"rows_{key}")
        if st.form_submit_button("Re-sample"):
            with show_errors():
                data = resample_archived(archive, entry.release_id, int(rows), rng=noise.secure_rng())
                state.analyses[f"resampled_{key}"] = data
    if f"resampled_{key}" in state.analyses:
        st.download_button("Download the re-sampled rows (CSV)", data=state.analyses[f"resampled_{key}"],
                           file_name=f"synthetic_{key}.csv", mime="text/csv", key=f"dl_resampled_{key}")


def main() -> None:
    state = get_state(st.session_state)
    st.title("Releases")
    st.markdown("Every release is kept in the release archive the moment its budget is spent: it survives a"
                " reload, a closed tab or a server restart, and its download is the same file as the first time."
                " Released outputs are differentially private, so keeping them is safe.")
    try:
        rows, admin = entries(state)
    except DPSynthError as exc:
        st.error(str(exc))
        return
    if not rows:
        st.info("No release yet" + (" for the datasets you loaded." if not admin else "."))
        st.page_link("pages/4_release.py", label="Go to Release", icon=":material/rocket_launch:")
        return
    archive = Archive.for_ledger(state.ledger())
    mine = [e for e in rows if e.dataset_id == state.dataset_id]
    others = [e for e in rows if e.dataset_id != state.dataset_id]
    for title, group in (("This dataset", mine), ("Other datasets" if admin or state.dataset_id else "All", others)):
        if not group:
            continue
        st.subheader(title)
        for e in reversed(group):
            delta = f", δ = {e.delta:g}" if e.delta else ""
            with st.expander(f"{e.created} · {e.label or e.dataset_id[:12]} · {e.method}, ε = {e.epsilon:g}{delta}"
                             f" · {e.status}", expanded=e is group[-1] and title == "This dataset"):
                with show_errors():
                    show_entry(state, archive, e)


main()
