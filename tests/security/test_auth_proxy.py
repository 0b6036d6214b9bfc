"""Header spoofing against a live `yuxi-dash serve` in proxy mode, and the local-mode bind.

Every visit is a raw websocket session on Streamlit's `/_stcore/stream` with
headers of the attacker's choosing (see `tests.security.live.visit`), against
the real command in its own process.

- Proxy mode with YUXI_DASH_PROXY_SECRET set, bound to 127.0.0.1: no secret,
  a wrong secret, a repeated secret header are refused; the right secret signs
  in with the allowlist role; a listed email is still refused without it.
- Proxy mode with no secret, loopback bind: the header is believed, and the
  banner says anyone on the host can claim any identity. On 0.0.0.0: refused.
- Local mode: `yuxi-dash serve --server.address 127.0.0.1 --server.address
  0.0.0.0` refuses to start; `streamlit run app.py --server.address 0.0.0.0`
  refuses every visitor, from this machine's non-loopback address and from
  127.0.0.1; a loopback bind reached through a same-host proxy
  (X-Forwarded-For, which uvicorn believes from 127.0.0.1) refuses the remote peer.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.live_server import (
    dashboard_env,
    free_port,
    serving,
    streamlit_command,
    yuxi_dash_command,
)
from tests.security.live import signed_in_line, texts, visit

SECRET = "s3cret-proxy-token"
ADMIN = "boss@example.com"
OPERATOR = "kim@example.com"
ROLES = {"YUXI_DASH_ADMINS": ADMIN, "YUXI_DASH_OPERATORS": OPERATOR}
LOCAL_REFUSAL = "Local mode signs"


def _non_loopback_address() -> str | None:
    """This machine's first non-loopback IPv4 address (`hostname -I`), if it has one."""
    found = subprocess.run(["hostname", "-I"], capture_output=True, text=True, check=False)
    for address in found.stdout.split():
        if "." in address and not address.startswith("127."):
            return address
    return None


@pytest.fixture(scope="module")
def proxy_with_secret(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """`yuxi-dash serve` in proxy mode with a secret, bound to loopback: the port."""
    root = tmp_path_factory.mktemp("proxy-secret")
    port = free_port()
    env = dashboard_env(root, YUXI_DASH_AUTH_MODE="proxy", YUXI_DASH_PROXY_SECRET=SECRET, **ROLES)
    command = [*yuxi_dash_command(), "serve", "--server.address", "127.0.0.1"]
    with serving([*command, "--server.port", str(port)], cwd=root, env=env):
        yield port


def test_proxy_secret_is_required_even_on_a_loopback_bind(proxy_with_secret: int) -> None:
    port = proxy_with_secret
    attempts = {
        "no header at all": {},
        "email, no secret": {"X-Forwarded-Email": ADMIN},
        "email, wrong secret": {"X-Forwarded-Email": ADMIN, "X-Yuxi-Proxy-Secret": "guess"},
        "email, empty secret": {"X-Forwarded-Email": ADMIN, "X-Yuxi-Proxy-Secret": ""},
        "email, secret with a suffix": {
            "X-Forwarded-Email": ADMIN,
            "X-Yuxi-Proxy-Secret": SECRET + "x",
        },
    }
    seen = {name: visit("127.0.0.1", port, headers) for name, headers in attempts.items()}
    signed_in = {name: signed_in_line(drawn) for name, drawn in seen.items()}
    assert signed_in == dict.fromkeys(attempts), "signed in without the secret"
    for name, drawn in seen.items():
        errors = texts(drawn, "alert")
        assert errors and "trusted proxy" in errors[0], f"{name}: {drawn}"
        assert [kind for kind, _ in drawn] == ["heading", "alert"], f"{name}: more than a refusal"


def test_the_right_secret_signs_in_with_the_allowlist_role(proxy_with_secret: int) -> None:
    port = proxy_with_secret
    admin = visit("127.0.0.1", port, {"X-Forwarded-Email": ADMIN, "X-Yuxi-Proxy-Secret": SECRET})
    assert signed_in_line(admin) == f"Signed in as {ADMIN} · admin · proxy"
    operator = visit(
        "127.0.0.1",
        port,
        {"X-Forwarded-Email": f"Kim <{OPERATOR}>", "X-Yuxi-Proxy-Secret": SECRET},
    )
    assert signed_in_line(operator) == f"Signed in as {OPERATOR} · operator · proxy"
    stranger = visit(
        "127.0.0.1", port, {"X-Forwarded-Email": "who@else.org", "X-Yuxi-Proxy-Secret": SECRET}
    )
    assert signed_in_line(stranger) is None
    assert any("not allowed" in text for text in texts(stranger, "alert"))


def test_a_forged_email_next_to_the_secret_is_refused(proxy_with_secret: int) -> None:
    """Two user headers (the proxy's and one passed through from the client) are ambiguous."""
    headers = [
        ("X-Yuxi-Proxy-Secret", SECRET),
        ("X-Forwarded-Email", OPERATOR),
        ("X-Forwarded-Email", ADMIN),
    ]
    drawn = visit("127.0.0.1", proxy_with_secret, headers)
    assert signed_in_line(drawn) is None
    assert any("more than one user" in text for text in texts(drawn, "alert")), drawn


def test_no_secret_is_believed_on_loopback_only_and_says_so(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    root = tmp_path_factory.mktemp("proxy-no-secret")
    env = dashboard_env(root, YUXI_DASH_AUTH_MODE="proxy", **ROLES)
    loopback, everywhere = free_port(), free_port()
    command = [*yuxi_dash_command(), "serve", "--server.port"]
    with serving([*command, str(loopback), "--server.address", "127.0.0.1"], cwd=root, env=env):
        drawn = visit("127.0.0.1", loopback, {"X-Forwarded-Email": ADMIN})
    assert signed_in_line(drawn) == f"Signed in as {ADMIN} · admin · proxy"
    banner = " ".join(texts(drawn, "alert")).replace("\\", "")
    assert "without YUXI_DASH_PROXY_SECRET" in banner and "any identity" in banner
    with serving([*command, str(everywhere), "--server.address", "0.0.0.0"], cwd=root, env=env):
        drawn = visit("127.0.0.1", everywhere, {"X-Forwarded-Email": ADMIN})
    assert signed_in_line(drawn) is None
    assert any("not bound to loopback" in text for text in texts(drawn, "alert")), drawn


# --- local mode: the address Streamlit really bound ----------------------------------------


def test_serve_refuses_a_repeated_address_whose_last_value_is_not_loopback(
    tmp_path: Path,
) -> None:
    port = free_port()
    command = [
        *yuxi_dash_command(),
        "serve",
        "--server.port",
        str(port),
        "--server.address",
        "127.0.0.1",
        "--server.address",
        "0.0.0.0",
    ]
    env = dashboard_env(tmp_path, YUXI_DASH_AUTH_MODE="local")
    popen = subprocess.Popen(
        command,
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, err = popen.communicate(timeout=60)
    except subprocess.TimeoutExpired:  # it went on to serve: kill its whole group
        os.killpg(popen.pid, signal.SIGKILL)
        popen.communicate()
        pytest.fail(f"serve started a local-mode server on 0.0.0.0:{port}")
    assert popen.returncode == 2, err
    assert "127.0.0.1 only, not 0.0.0.0" in err and "[invalid_input]" in err


def test_streamlit_run_on_every_interface_in_local_mode_refuses_every_visitor(
    tmp_path: Path,
) -> None:
    port = free_port()
    env = dashboard_env(tmp_path, YUXI_DASH_AUTH_MODE="local")
    command = [
        *streamlit_command(),
        "--server.port",
        str(port),
        "--server.address",
        "127.0.0.1",
        "--server.address",
        "0.0.0.0",  # Streamlit binds the last one
    ]
    outside = _non_loopback_address()
    with serving(command, cwd=tmp_path, env=env):
        visits = {"127.0.0.1": visit("127.0.0.1", port)}
        if outside is not None:
            visits[outside] = visit(outside, port)
    assert outside is None or len(visits) == 2
    for host, drawn in visits.items():
        assert signed_in_line(drawn) is None, f"signed in from {host}"
        errors = texts(drawn, "alert")
        assert errors and LOCAL_REFUSAL in errors[0] and "0.0.0.0" in errors[0], (host, drawn)


def test_local_mode_refuses_a_remote_peer_behind_a_same_host_proxy(tmp_path: Path) -> None:
    """Bound to 127.0.0.1, but a proxy on this host forwards a visitor from elsewhere."""
    port = free_port()
    env = dashboard_env(tmp_path, YUXI_DASH_AUTH_MODE="local")
    command = [*yuxi_dash_command(), "serve", "--server.port", str(port)]
    with serving(command, cwd=tmp_path, env=env):
        here = visit("127.0.0.1", port)
        forwarded = visit("127.0.0.1", port, {"X-Forwarded-For": "203.0.113.9"})
    assert signed_in_line(here) == "Signed in as operator@localhost · admin · local"
    assert signed_in_line(forwarded) is None
    errors = texts(forwarded, "alert")
    assert errors and "does not come from 127.0.0.1" in errors[0], forwarded
