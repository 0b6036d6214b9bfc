"""The read views of a user's memory: the LaunchDarkly gate and audit every view
goes through (`gate`, `gated_views`), and the views behind the memory pages.
"""
