"""CLI commands `yuxi-dash api serve` and `yuxi-dash api token create|list|revoke`.

`api serve [--host H] [--port P] [--allow-network]` applies pending migrations
and runs the HTTP API (`yuxi_dash.api.app`) on uvicorn as `api.server` sets it
up (header-read timeout, connection cap) until SIGTERM or Ctrl-C. It binds
127.0.0.1 by default; an address that is not loopback is refused (exit 2)
unless `--allow-network` or `YUXI_DASH_API_ALLOW_NETWORK=true` says so.

The token commands need `YUXI_DASH_CLI_ROLE=admin`; the CLI's own actor
(`YUXI_DASH_CLI_ACTOR`, else `cli`) is who the audit log records as acting,
while `create --actor NAME` names the token's actor (`api:NAME`) and
`--expires-in 90d` its lifetime. `create` prints the token once (with
`--json`: `{"token": ..., "id": ...}`); `list` never shows a token or its hash.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import TYPE_CHECKING

from yuxi_dash.cli.arguments import positive_int
from yuxi_dash.cli.common import CommandResult, add_json_flag, command_actor
from yuxi_dash.cli.guards import store_errors
from yuxi_dash.cli.output import iso, render_table
from yuxi_dash.errors import InvalidInput
from yuxi_dash.settings import Settings, get_settings

if TYPE_CHECKING:
    from yuxi_dash.access.roles import Actor

LOOPBACK = "127.0.0.1"
DEFAULT_PORT = 8600
MAX_PORT = 65535
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def check_bind(host: str, *, allow_network: bool, settings: Settings) -> None:
    """Refuse a bind address that is not loopback unless the network was opted into."""
    from yuxi_dash.access.roles import is_loopback

    if is_loopback(host) or allow_network or settings.api_allow_network:
        return
    raise InvalidInput(
        f"the API serves loopback only, not {host}; pass --allow-network or set "
        "YUXI_DASH_API_ALLOW_NETWORK=true to serve a network (put TLS in front)"
    )


def _port(text: str) -> int:
    value = positive_int(text)
    if value > MAX_PORT:
        raise argparse.ArgumentTypeError(f"a port is at most {MAX_PORT}")
    return value


def _cmd_serve(args: argparse.Namespace) -> CommandResult:
    import uvicorn

    from yuxi_dash.api.app import create_app
    from yuxi_dash.api.server import server_config
    from yuxi_dash.store.db import get_engine

    settings = get_settings()
    check_bind(args.host, allow_network=args.allow_network, settings=settings)
    get_engine(settings)  # migrations, before the first request
    config = server_config(create_app(settings), host=args.host, port=args.port, settings=settings)
    print(f"yuxi-dash: API on http://{args.host}:{args.port}", file=sys.stderr, flush=True)
    server = uvicorn.Server(config)
    stops: list[int] = []
    # uvicorn shuts down gracefully on SIGTERM / SIGINT, then raises the signal again for
    # the handler it found: ours notes it, so a stop as asked exits 0
    on_main_thread = threading.current_thread() is threading.main_thread()
    previous = {
        sig: signal.signal(sig, lambda signum, _frame: stops.append(signum))
        for sig in STOP_SIGNALS
        if on_main_thread
    }
    try:
        server.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if not server.started:  # the port was taken, say; uvicorn logged why
        return CommandResult(data={"served": False}, text=None, exit_code=1)
    if stops:
        print("yuxi-dash: API stopped", file=sys.stderr, flush=True)
    return CommandResult(data={"served": True}, text=None)


def _admin(action: str, target: str) -> Actor:
    """Who runs a token command: YUXI_DASH_CLI_ACTOR, else cli (`--actor` names the token's)."""
    return command_actor(argparse.Namespace(), action=action, target=target, default="cli")


def _cmd_token_create(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.api.service_tokens import CREATE_ACTION, create_token

    by = _admin(CREATE_ACTION, "api_token:?")
    created = create_token(
        role=args.role,
        actor_name=args.actor,
        by=by,
        settings=get_settings(),
        expires_in=args.expires_in,
    )
    data = {
        **created.to_dict(),
        "created_at": iso(created.created_at),
        "expires_at": iso(created.expires_at),
    }
    expiry = f"expires {iso(created.expires_at)}" if created.expires_at else "never expires"
    text = (
        f"{created.token}\n"
        f"(token {created.id}, role {created.role}, actor api:{created.actor}, {expiry}; "
        "shown once: only its hash is stored)"
    )
    return CommandResult(data, text=text)


def _cmd_token_list(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.api.service_tokens import LIST_ACTION, list_tokens

    tokens = list_tokens(by=_admin(LIST_ACTION, "api_token:*"), settings=get_settings())
    data = [
        {
            **info.to_dict(),
            "created_at": iso(info.created_at),
            "revoked_at": iso(info.revoked_at),
            "expires_at": iso(info.expires_at),
        }
        for info in tokens
    ]
    rows = [
        (info.id, info.role, f"api:{info.actor}", info.created_at, info.revoked_at, info.expires_at)
        for info in tokens
    ]
    table = render_table(rows, ("ID", "ROLE", "ACTOR", "CREATED", "REVOKED", "EXPIRES"))
    return CommandResult(data, text=table if data else "no API tokens")


def _cmd_token_revoke(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.api.service_tokens import REVOKE_ACTION, revoke_token

    by = _admin(REVOKE_ACTION, f"api_token:{args.id}")
    info, revoked_now = revoke_token(args.id, by=by, settings=get_settings())
    data = {
        **info.to_dict(),
        "created_at": iso(info.created_at),
        "revoked_at": iso(info.revoked_at),
        "expires_at": iso(info.expires_at),
        "revoked_now": revoked_now,
    }
    text = f"revoked token {info.id}" if revoked_now else f"token {info.id} was already revoked"
    return CommandResult(data, text=text)


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001
    """Add `api serve` and `api token ...` to the top-level parser."""
    api = sub.add_parser("api", help="the HTTP API: serve it, manage its tokens")
    api_sub = api.add_subparsers(dest="api_command", metavar="COMMAND")
    api_sub.required = True

    serve = api_sub.add_parser("serve", help="run the HTTP API on uvicorn")
    serve.add_argument("--host", default=LOOPBACK, help=f"bind address (default: {LOOPBACK})")
    serve.add_argument(
        "--port", type=_port, default=DEFAULT_PORT, help=f"port (default: {DEFAULT_PORT})"
    )
    serve.add_argument(
        "--allow-network",
        action="store_true",
        help="allow a bind address that is not loopback (or YUXI_DASH_API_ALLOW_NETWORK=true)",
    )
    serve.set_defaults(handler=store_errors(_cmd_serve))

    token = api_sub.add_parser("token", help="service tokens (needs YUXI_DASH_CLI_ROLE=admin)")
    token_sub = token.add_subparsers(dest="token_command", metavar="COMMAND")
    token_sub.required = True

    create = token_sub.add_parser("create", help="a new token, printed once")
    create.add_argument(
        "--role", required=True, choices=("viewer", "operator", "admin"), help="what it may do"
    )
    create.add_argument(
        "--actor", required=True, metavar="NAME", help="who its calls are (audited as api:NAME)"
    )
    create.add_argument(
        "--expires-in",
        metavar="DURATION",
        help="its lifetime: 90d, 12h, 30m, 45s or seconds (default: it never expires)",
    )
    add_json_flag(create)
    create.set_defaults(handler=store_errors(_cmd_token_create))

    listing = token_sub.add_parser("list", help="every token (never the token itself)")
    add_json_flag(listing)
    listing.set_defaults(handler=store_errors(_cmd_token_list))

    revoke = token_sub.add_parser("revoke", help="revoke a token by its id")
    revoke.add_argument("id", metavar="ID")
    add_json_flag(revoke)
    revoke.set_defaults(handler=store_errors(_cmd_token_revoke))
