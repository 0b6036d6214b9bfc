"""The on-disk workdir and its files: symlink-safe opens, content-addressed tool
results and their audited index.
"""
