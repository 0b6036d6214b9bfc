"""Process entry for `yuxi-dash serve`: Streamlit's own CLI, with app.py's navigation in charge.

Streamlit decides once per process, when the first session starts, whether
the app is an old-style multipage app because a `pages/` directory sits next
to the main script. If that first session opens a page URL (say /threads), it
runs pages/threads.py directly, app.py never calls `st.navigation`, and every
later session of the process gets the file-list sidebar instead of ours.
app.py always calls `st.navigation`, so we settle that question up front.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.web.cli import main as streamlit_main

    PagesManager.uses_pages_directory = False
    sys.argv = ["streamlit", *(sys.argv[1:] if argv is None else argv)]
    streamlit_main(prog_name="streamlit")


if __name__ == "__main__":
    main()
