"""The tuning lab: replay recorded threads under other compression settings, side by side
with the settings in force, without writing to any thread.
"""
