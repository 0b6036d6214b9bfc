"""The HTTP API of yuxi-dash (`yuxi-dash api serve`).

`metrics` is the `GET /metrics` router (prometheus_client), included by the
application.
"""
