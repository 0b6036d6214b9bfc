"""The agent simulator behind `yuxi-dash simulate` and the demo's threads (not the product).

A real `langchain.agents.create_agent` graph: a deterministic fake chat model calls realistic
tools, our compression middleware offloads and summarizes at the agent's threshold, and the
configured LangGraph checkpointer keeps the state. The rooms, each importing only the ones
above it:
- `story`: the demo's cast (`DEMO_USERS`) and what each user tells the assistant; a leaf;
- `topics`: what simulated users work on, and the seeded generators;
- `tools`: the tools' outputs, and the tools (`query_kb`, `web_search`, `run_command`,
  `write_file`);
- `model`: the fake chat model and the simulated user's messages;
- `loop`: the simulated agents and the agent factory (`build_agent`, `play_turn`);
- `run`: `simulate`, which plays turns through the real intake, run lifecycle and projection.

The product never imports this package; only the CLI commands and the demo do.
"""
