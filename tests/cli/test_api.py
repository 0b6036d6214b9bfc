"""`yuxi-dash api serve` as a real process, and `yuxi-dash api token create|list|revoke`."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from tests.fixtures.live_server import dashboard_env, free_port, yuxi_dash_command
from tests.service.builders import seed_thread
from yuxi_dash.access.audit import wait_for_pending_audit
from yuxi_dash.api.service_tokens import hash_token
from yuxi_dash.cli import main
from yuxi_dash.cli.api import check_bind
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import ApiToken
from yuxi_dash.store.queries import list_audit

START_SECONDS = 60


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _audit(action: str) -> list:
    wait_for_pending_audit()
    with session_scope() as session:
        return [row for row in list_audit(session) if row.action == action]


@pytest.fixture
def admin_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YUXI_DASH_CLI_ROLE", "admin")
    monkeypatch.setenv("YUXI_DASH_CLI_ACTOR", "root@example.com")
    get_settings.cache_clear()


def test_token_create_list_revoke(admin_cli: None, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "api", "token", "create", "--role", "operator", "--actor", "ci")
    assert code == 0
    token = out.splitlines()[0]
    assert token.startswith("yxd_") and len(token) > 40
    assert "shown once" in out

    code, out, _ = _run(
        capsys, "api", "token", "create", "--role", "viewer", "--actor", "grafana", "--json"
    )
    created = json.loads(out)
    assert code == 0
    assert set(created) == {"id", "token", "role", "actor", "created_at", "expires_at"}
    assert (created["role"], created["actor"], created["expires_at"]) == ("viewer", "grafana", None)

    code, out, _ = _run(capsys, "api", "token", "list", "--json")
    listed = json.loads(out)
    assert code == 0 and {item["actor"] for item in listed} == {"ci", "grafana"}
    fields = {"id", "role", "actor", "created_at", "revoked_at", "expires_at"}
    assert all(set(item) == fields for item in listed)
    assert token not in out and created["token"] not in out and hash_token(token) not in out
    code, out, _ = _run(capsys, "api", "token", "list")
    assert code == 0 and "api:grafana" in out and token not in out

    code, out, _ = _run(capsys, "api", "token", "revoke", created["id"], "--json")
    assert code == 0 and json.loads(out)["revoked_now"] is True
    code, out, _ = _run(capsys, "api", "token", "revoke", created["id"])
    assert code == 0 and "already revoked" in out
    code, _, err = _run(capsys, "api", "token", "revoke", "ffff0000ffff0000")
    assert code == 3 and "[api_token_not_found]" in err

    creates = _audit("api_token.create")
    assert len(creates) == 2 and {row.actor for row in creates} == {"root@example.com"}
    assert {row.detail["token_actor"] for row in creates} == {"api:ci", "api:grafana"}
    revokes = _audit("api_token.revoke")
    assert sorted(row.outcome for row in revokes) == ["completed", "no_op", "refused"]
    assert token not in json.dumps([row.detail for row in creates + revokes])


def test_a_token_can_expire(admin_cli: None, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ("api", "token", "create", "--role", "operator", "--actor", "ci", "--expires-in")
    code, out, _ = _run(capsys, *argv, "90d", "--json")
    created = json.loads(out)
    expires = datetime.fromisoformat(created["expires_at"])
    assert code == 0
    assert expires - datetime.fromisoformat(created["created_at"]) == timedelta(days=90)
    code, out, _ = _run(capsys, *argv, "12h")
    assert code == 0 and "expires " in out.splitlines()[1]
    code, out, _ = _run(capsys, "api", "token", "list", "--json")
    assert sorted(item["expires_at"] is None for item in json.loads(out)) == [False, False]
    assert created["expires_at"] in out
    code, out, _ = _run(capsys, "api", "token", "list")
    assert "EXPIRES" in out.splitlines()[0] and expires.strftime("%Y-%m-%d") in out
    for nonsense in ("soon", "0", "3w", "1.5h", "4000d"):
        code, out, err = _run(capsys, *argv, nonsense)
        assert code == 2 and out == "" and "[invalid_input]" in err and "lifetime" in err
    refusals = [row for row in _audit("api_token.create") if row.outcome == "refused"]
    assert len(refusals) == 5 and {row.detail["code"] for row in refusals} == {"invalid_input"}
    with session_scope() as session:
        assert len(session.scalars(sa.select(ApiToken)).all()) == 2


def test_token_commands_need_the_admin_role(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "api", "token", "create", "--role", "admin", "--actor", "x")
    assert code == 1 and out == "" and "[forbidden]" in err
    assert _run(capsys, "api", "token", "list")[0] == 1
    (refusal,) = _audit("api_token.create")
    assert (refusal.actor, refusal.outcome, refusal.detail["code"]) == (
        "cli",
        "refused",
        "forbidden",
    )
    with session_scope() as session:
        assert session.scalars(sa.select(ApiToken)).all() == []


def test_a_bad_token_actor_is_refused(admin_cli: None, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "api", "token", "create", "--role", "viewer", "--actor", "a\nb")
    assert code == 2 and "[invalid_input]" in err
    code, _, err = _run(capsys, "api", "token", "create", "--role", "viewer", "--actor", "x" * 200)
    assert code == 2 and "128" in err
    with pytest.raises(SystemExit) as usage:  # a usage error: argparse's exit 2
        main(["api", "token", "create", "--role", "god", "--actor", "x"])
    assert usage.value.code == 2


def test_api_serve_binds_loopback_unless_the_network_is_opted_into(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = _run(capsys, "api", "serve", "--host", "0.0.0.0", "--port", str(free_port()))
    assert code == 2 and "--allow-network" in err and "YUXI_DASH_API_ALLOW_NETWORK" in err
    check_bind("127.0.0.1", allow_network=False, settings=Settings())
    check_bind("::1", allow_network=False, settings=Settings())
    check_bind("0.0.0.0", allow_network=True, settings=Settings())
    check_bind("0.0.0.0", allow_network=False, settings=Settings(api_allow_network=True))
    with pytest.raises(SystemExit) as usage:
        main(["api", "serve", "--port", "70000"])
    assert usage.value.code == 2


def test_api_serve_runs_until_sigterm(
    admin_cli: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed_thread()  # in the same SQLite file and workdir the process uses
    _, out, _ = _run(
        capsys, "api", "token", "create", "--role", "operator", "--actor", "job", "--json"
    )
    token = json.loads(out)["token"]
    port = free_port()
    env = dashboard_env(tmp_path, YUXI_DASH_API_HEADER_TIMEOUT_SECONDS="1")
    assert env["YUXI_DASH_DATABASE_URL"] == os.environ["YUXI_DASH_DATABASE_URL"]
    process = subprocess.Popen(
        [*yuxi_dash_command(), "api", "serve", "--port", str(port)],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + START_SECONDS
        while True:
            assert process.poll() is None, process.communicate()[1]
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "api serve did not answer"
            time.sleep(0.2)
        assert httpx.get(f"{base}/readyz", timeout=10).status_code == 200
        response = httpx.post(
            f"{base}/api/chat/thread/t1/compress",
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        )
        assert response.status_code == 200 and response.json()["status"] == "completed"
        _assert_slow_headers_are_cut_off(port)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == 0
    assert f"API on http://127.0.0.1:{port}" in err
    assert token not in out + err and "t1" not in out + err  # no token, no path in its logs
    (row,) = [r for r in _audit("compress") if r.outcome == "completed"]
    assert row.actor == "api:job"


def _assert_slow_headers_are_cut_off(port: int, timeout: float = 1.0, margin: float = 4.0) -> None:
    """The process runs with YUXI_DASH_API_HEADER_TIMEOUT_SECONDS=1: a dripping client is closed."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout + margin) as sock:
        started = time.monotonic()
        try:
            for byte in b"GET /healthz HTTP/1.1\r\nX-Slow: " + b"a" * 100:
                sock.sendall(bytes([byte]))
                time.sleep(0.3)
                assert time.monotonic() - started < timeout + margin, "still open"
        except (BrokenPipeError, ConnectionResetError):
            return
        raise AssertionError("the server never closed the slow connection")


def test_an_unusable_cli_actor_is_refused_and_audited(
    admin_cli: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("YUXI_DASH_CLI_ACTOR", "  ")
    get_settings.cache_clear()
    code, _, err = _run(capsys, "api", "token", "create", "--role", "viewer", "--actor", "x")
    assert code == 2 and "[invalid_input]" in err
    (refusal,) = _audit("api_token.create")
    assert (refusal.actor, refusal.outcome) == ("cli:unnamed", "refused")
