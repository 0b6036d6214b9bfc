"""Per-thread pressure alerts: rules, the evaluation state machine, delivery, the hooks.

`rules` owns the rule rows (admin-only writes, audited), `evaluate` one pass
of the state machine (inactive -> pending -> firing -> resolved, hysteresis,
one evaluator at a time), `delivery` Alertmanager and the signed webhook (an
outbox), `hooks` the small calls the usage writes and the attach scan make
(they send nothing), `loop` the background pass of `serve` (time-based
firing and every send), `views` what the page and `alerts list` read.
"""
