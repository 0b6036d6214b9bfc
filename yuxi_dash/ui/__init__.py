"""Shared Streamlit pieces for app.py and app_pages/: identity, cached loaders, charts, formatting.

Only this package, app_pages/ and app.py import Streamlit. Pure helpers that do not
need Streamlit (formatting, chart builders, identity resolution) are plain
functions so they can be tested without a running app.
"""
