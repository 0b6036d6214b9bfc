"""Tuning lab: what other compression settings would have done to an agent's recorded threads.

The form takes the agent and the proposed summary threshold, tool result limit and
messages kept (and a sample size); the run replays the agent's threads, ours and
attached, through the engine under both settings (`tuning.fleet`), a slice per run with
progress and Stop (`ui.tuning.run`). Nothing is written to any thread; a run is one audit
row. Operators and admins may run it (the service checks the role too).
"""

from __future__ import annotations

import streamlit as st

from yuxi_dash.access.roles import Role
from yuxi_dash.ui.identity import require_actor
from yuxi_dash.ui.tuning.run import RUN_KEY, draw_form, draw_run, tuning_agents

actor = require_actor(Role.OPERATOR, action="run the tuning lab")
st.title("Tuning lab")
st.caption(
    "Replay an agent's recorded threads under other compression settings, side by side "
    "with the settings in force. Nothing is written to any thread."
)

agents = tuning_agents()
if not agents:
    st.info("No agent yet: the lab replays an agent's recorded threads.")
    st.stop()

draw_form(actor, agents)
draw_run(st.session_state.get(RUN_KEY))
