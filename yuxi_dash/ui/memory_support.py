"""The Memory support page's calls: prepare a support bundle, forget a user.

Neither is cached: both are audited actions. `prepare_bundle` streams the
bundle into a temporary file (one per session, the previous one removed) and
hands back its path; the page's download button reads the file only when
clicked, so a big bundle is not held by the script run. The files live in a
private directory (`bundle_dir`, mode 0700) and any older than BUNDLE_TTL is
removed on the next prepare, so a bundle of a closed session does not linger. While it is
written a progress bar shows the facts done of the total, then each section, then goes.
`forget` is admin only here and again in the service. Errors are one line (`guarded`).
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import streamlit as st

from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.memory.support.bundle import BundleProgress, BundleResult, bundle_to_file
from yuxi_dash.memory.support.forget import forget_user
from yuxi_dash.ui.memory import clear_after_correction, guarded
from yuxi_dash.ui.page_text import md

BUNDLE_KEY = "memory_support_bundle"
MIME = {"json": "application/json", "md": "text/markdown"}
BUNDLE_TTL_SECONDS = 3600.0


def bundle_dir() -> Path:
    """The private directory of prepared bundles (they hold a user's memory)."""
    path = Path(tempfile.gettempdir()) / f"yuxi-dash-bundles-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def sweep_bundles(now: float | None = None) -> int:
    """Remove prepared bundles older than BUNDLE_TTL_SECONDS; how many were removed."""
    cutoff = (now if now is not None else time.time()) - BUNDLE_TTL_SECONDS
    removed = 0
    for path in bundle_dir().glob("bundle-*"):
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink()
                removed += 1
        except FileNotFoundError:
            continue
    return removed


@dataclass(frozen=True)
class PreparedBundle:
    path: Path
    file_name: str
    mime: str
    result: BundleResult

    def read(self) -> bytes:
        return self.path.read_bytes()


def _drop_previous() -> None:
    previous = st.session_state.pop(BUNDLE_KEY, None)
    if isinstance(previous, PreparedBundle):
        previous.path.unlink(missing_ok=True)


SECTION_TEXT = {
    "episodes": "the recent episodes",
    "corrections": "the corrections",
    "threads": "the threads",
    "done": "done",
}


def prepare_bundle(actor: Actor, user_id: str, fmt: str, episodes: int) -> PreparedBundle:
    """Write the user's bundle to a temp file (audited by the service), with a progress bar
    while it is written; kept in the session."""
    _drop_previous()
    sweep_bundles()
    handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed at once; the path is kept
        prefix="bundle-", suffix=f".{fmt}", delete=False, dir=bundle_dir()
    )
    handle.close()
    path = Path(handle.name)
    bar = st.progress(0.0, text="Writing the bundle…")

    def show(step: BundleProgress) -> None:  # facts done of the total, then each section
        bar.progress(
            step.fraction,
            text=md("Writing the bundle: {:,} of {:,} facts", step.facts, step.facts_total)
            if step.section in ("facts", "as_of_facts")
            else md("Writing the bundle: {}", SECTION_TEXT.get(step.section, step.section)),
        )

    try:
        result = guarded(
            lambda: bundle_to_file(
                user_id, path, actor=actor, fmt=fmt, episodes=episodes, progress=show
            )
        )
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    finally:
        bar.empty()
    prepared = PreparedBundle(
        path=path,
        file_name=f"support-bundle-{user_id}.{fmt}",
        mime=MIME[fmt],
        result=result,
    )
    st.session_state[BUNDLE_KEY] = prepared
    return prepared


def prepared_bundle(user_id: str) -> PreparedBundle | None:
    """The bundle prepared in this session for this user, if its file is still there."""
    prepared = st.session_state.get(BUNDLE_KEY)
    if (
        isinstance(prepared, PreparedBundle)
        and prepared.result.user_id == user_id
        and prepared.path.is_file()
    ):
        return prepared
    return None


def forget(actor: Actor, user_id: str, confirmation: str) -> dict[str, Any] | None:
    """The admin-only forget (the service checks the role and the confirmation again)."""
    if actor.role < Role.ADMIN:
        return None
    report = guarded(lambda: forget_user(user_id, confirmation, actor=actor))
    _drop_previous()
    clear_after_correction()
    return report.to_dict()
