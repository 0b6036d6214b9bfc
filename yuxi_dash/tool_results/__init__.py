"""The tool results a compress or an agent saved to files: listed, checked and opened.

- `index`: the audited tool-results index: list and count it, re-hash each file against
  its SHA-256, read a file through the workdir's link-refusing reads (every read audited,
  allowed or refused).
- `opened`: a result opened beside what the model saw of it (its preview in the thread).

Role-checked and audited here; the files themselves are `yuxi_dash.files`.
"""
