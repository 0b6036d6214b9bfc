"""Whether a user's memory looks right: retirements that look wrong, and assistant-only
facts (no provenance in the user's own words).
"""
