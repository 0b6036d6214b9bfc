"""The HTTP API of yuxi-dash (`yuxi-dash api serve`): the compress contract over our own threads.

`app.create_app()` is the FastAPI application; `service_tokens` owns the service tokens
it authenticates with; `metrics` is the `GET /metrics` router (Prometheus);
`compressions` is a thread's compression records (its body, which the CLI prints too:
`thread_compressions`);
`docs` holds the OpenAPI declarations and the offline `/docs` page; `server`
is how `api serve` runs uvicorn (header-read timeout, connection cap). The API
calls the same service functions the CLI and the pages call, so roles are
checked and attempts audited there.
"""
