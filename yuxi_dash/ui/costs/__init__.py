"""Model cost on the pages: the Overview's spend per agent and day, a thread's cost.

- `loaders`: the cached reads (`costs.spend`, `costs.savings`), prices loaded with them.
- `panels`: the Overview's spend panel and thread detail's cost lines, with the hint to set
  `YUXI_DASH_MODEL_PRICES` when no prices file is set.
"""
