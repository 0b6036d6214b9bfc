"""The memory pages' review parts: memory as of a moment, retirements that look wrong,
and assistant-only facts.
"""
