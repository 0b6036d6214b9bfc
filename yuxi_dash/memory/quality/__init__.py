"""Whether a user's memory looks right: retirements that look wrong, and memory
written in the assistant's words rather than the user's.
"""
