"""Model cost: the prices file (`YUXI_DASH_MODEL_PRICES`) and the dollars of recorded
model calls per thread, user, agent and day.
"""
