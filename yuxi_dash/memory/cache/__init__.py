"""How fresh the kept numbers are: the per-graph distributions and the change
watcher they are kept under.
"""
