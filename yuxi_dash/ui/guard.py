"""The last line of defence around a page: typed errors and a lost database become one line.

Pages handle the refusals they expect; anything typed that escapes them (a
`YuxiDashError`) or a database that cannot be reached is shown as one plain
line instead of a traceback. Streamlit's own control flow (st.stop, st.rerun,
st.switch_page) derives from BaseException and passes through untouched.
"""

from __future__ import annotations

import logging

import sqlalchemy as sa
import streamlit as st
from streamlit.navigation.page import Page

from yuxi_dash.errors import StoreUnavailable, YuxiDashError
from yuxi_dash.ui.page_text import error_line, literal

log = logging.getLogger(__name__)

STORE_UNAVAILABLE = (  # same code as errors.StoreUnavailable (the CLI)
    "The database cannot be reached right now; check YUXI_DASH_DATABASE_URL or try again "
    "in a moment. [store_unavailable]"
)


def run_guarded(page: Page) -> None:
    """Run a navigation page, turning escaped typed / database errors into one line."""
    try:
        page.run()
    except StoreUnavailable:  # the checkpointer of our database could not connect
        log.warning("database unavailable (checkpointer)")
        st.error(literal(STORE_UNAVAILABLE))
    except YuxiDashError as exc:
        st.error(literal(error_line(exc)))  # a refusal may quote an id from the URL
    except (sa.exc.OperationalError, sa.exc.InterfaceError) as exc:
        log.warning("database unavailable (%s)", type(exc).__name__)
        st.error(literal(STORE_UNAVAILABLE))
