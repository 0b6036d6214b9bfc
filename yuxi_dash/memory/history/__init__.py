"""What a user's memory held at a moment, and what changed between two moments:
the facts, entities, episodes and warm context as of a time, and the two-moment diff.
"""
