"""The `memory` commands: the views (`views`), one fact's provenance and corrections
(`facts`), and the bundle and forget commands (`support`).
"""
