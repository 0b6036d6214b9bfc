"""The demo data behind `yuxi-dash demo` and `serve --demo` (not the product).

The rooms, each importing only the ones above it (and `yuxi_dash.sim`, whose `story` is the
cast, `DEMO_USERS`, and what each user tells the assistant):
- `flags`: the demo's LaunchDarkly flag file (`flags.json`, shipped);
- `plan`: the threads as a plan, what each user writes, their first answers;
- `clock`: the story time a demo thread's agent runs in;
- `rows`: what the story adds to a thread's projected rows;
- `threads`: the thread seeder (each thread played by the simulator's agent);
- `graph_build`: one user's Graphiti graph, built in memory;
- `graphs`: the graph seeder (every user's graph and Redis hit counters);
- `seed`: `seed_demo`, both seeders in order.

Only the CLI commands that run the demo import this package. This module imports
nothing, so importing `yuxi_dash.sim.story` stays cheap.
"""
