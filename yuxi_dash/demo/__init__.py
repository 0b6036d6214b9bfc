"""The demo data behind `yuxi-dash demo` and `serve --demo` (not the product).

The rooms, each importing only the ones above it (and the simulator,
`yuxi_dash.sim`):

- `story`: the cast (`DEMO_USERS`) and what each user tells the assistant; a leaf;
- `flags`: the demo's LaunchDarkly flag file (`flags.json`, shipped with the package);
- `plan`: the demo threads as a plan, what each user writes, and the answer each
  user was first given;
- `clock`: the story time a demo thread's agent runs in;
- `rows`: what the story adds to a thread's projected rows (intake, runs, times);
- `threads`: the thread seeder (plays each thread through the simulator's agent,
  projects it, resets, compresses a few as an operator);
- `graph_build`: one user's Graphiti graph, built in memory;
- `graphs`: the graph seeder (writes every user's graph and their Redis hit counters);
- `seed`: `seed_demo`, both seeders in order.

The product never imports this package; only the CLI commands that run it do.
This module imports nothing, so importing `yuxi_dash.demo.story` stays cheap.
"""
