"""The `memory` commands: the views (`views`), the support desk (`desk`) and the
bundle and forget commands (`support`).
"""
