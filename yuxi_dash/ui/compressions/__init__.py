"""The compression records on the pages: a thread's Compressions tab and the fleet's quality.

- `ledger_view`: a record's ledger and summary as rows and lines (pure, no Streamlit).
- `loaders`: the cached reads of the records and the fleet figures.
- `thread_tab`: thread detail's Compressions tab, each recoverable item opened at its line.
- `quality_charts`: the Compression quality page's charts.
"""
