"""The HTTP API of yuxi-dash (`yuxi-dash api serve`): the compress contract over our own threads.

`app.create_app()` is the FastAPI application; `tokens` owns the service tokens
it authenticates with; `metrics` is the `GET /metrics` router (Prometheus). The API calls the same service functions the CLI and
the pages call, so roles are checked and attempts audited there.
"""
