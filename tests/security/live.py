"""A raw Streamlit websocket client for the security tests.

`visit(...)` is what an attacker would use instead of a browser: it opens
Streamlit's `/_stcore/stream` websocket with chosen headers, asks for one script
run and returns every element the server drew, as (element type, text) pairs.
The dashboard process it visits comes from `tests.fixtures.live_server`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import pytest

RUN_SECONDS = 120


def visit(host: str, port: int, headers: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """Open a session over the websocket with `headers`, run the app once, return what it drew.

    `headers` may be a list of pairs to send one header several times. Each
    drawn element is (type, text): markdown and captions, alerts (st.error /
    st.info), headings, button labels. Ends at the run's `script_finished`.
    """
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    from websockets.sync.client import connect

    url = f"ws://{host}:{port}/_stcore/stream"
    drawn: list[tuple[str, str]] = []
    with connect(
        url, subprotocols=["streamlit"], additional_headers=headers or {}, open_timeout=30
    ) as websocket:
        rerun = BackMsg()
        rerun.rerun_script.query_string = ""
        rerun.rerun_script.page_script_hash = ""
        websocket.send(rerun.SerializeToString())
        deadline = time.monotonic() + RUN_SECONDS
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                pytest.fail(f"no script_finished from {url}; drawn so far: {drawn}")
            message = ForwardMsg()
            message.ParseFromString(websocket.recv(timeout=remaining))
            kind = message.WhichOneof("type")
            if kind == "script_finished":
                return drawn
            if kind == "delta" and message.delta.WhichOneof("type") == "new_element":
                element = message.delta.new_element
                element_type = element.WhichOneof("type")
                inner = getattr(element, element_type)
                text = getattr(inner, "body", None) or getattr(inner, "label", None) or ""
                drawn.append((element_type, str(text)))


def texts(drawn: list[tuple[str, str]], element_type: str) -> list[str]:
    return [text for kind, text in drawn if kind == element_type]


def signed_in_line(drawn: list[tuple[str, str]]) -> str | None:
    """The sidebar's "Signed in as ..." line, with Markdown escapes removed; None when absent."""
    for text in texts(drawn, "markdown"):
        if text.startswith("Signed in as"):
            return text.replace("\\", "").replace("**", "")
    return None
