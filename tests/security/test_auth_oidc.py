"""OIDC sign-in for real: `st.login` against a live OpenID Connect provider, in headless Chromium.

The provider is `oidc-provider-mock` (from the package registry) on 127.0.0.1:
a real authorization-code flow whose login form lets the test type the subject
(its email claim). The dashboard is `yuxi-dash serve` in oidc mode, reading
its `[auth]` secrets from a file in a temp dir (`--secrets.files`). The
replicas sit behind one origin (tests.security.forwarder), as behind a load
balancer, since Streamlit's auth cookie is bound to the origin of `redirect_uri`.

- A listed email signs in with its allowlist role and signs out again.
- An email on no list is refused after signing in at the provider.
- The auth cookie made by replica A signs the user in on replica B (same
  cookie_secret), in a fresh browser context holding only the copied cookies;
  replica C, with another cookie_secret, refuses the same cookies.
"""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fixtures.live_server import (
    dashboard_env,
    free_port,
    launch_chromium,
    started,
    wait_until_serving,
    yuxi_dash_command,
)
from tests.security.forwarder import Forwarder

pytestmark = pytest.mark.browser  # three dashboards, a forwarder, a provider and Chromium

ADMIN = "boss@example.com"
OPERATOR = "kim@example.com"
STRANGER = "stranger@other.org"
SHARED_COOKIE_SECRET = "replicas-share-this-cookie-secret-0123456789abcdef"
OTHER_COOKIE_SECRET = "a-different-deployment-cookie-secret-fedcba9876543210"
UI_TIMEOUT_MS = 90_000


@dataclass
class Deployment:
    """One origin (the forwarder) in front of replicas a, b (shared secret) and c (other)."""

    forwarder: Forwarder
    replicas: dict[str, int]
    provider: str


@pytest.fixture(scope="module")
def provider() -> Iterator[str]:
    """`python -m oidc_provider_mock` on a free loopback port: its base URL."""
    port = free_port()
    command = [sys.executable, "-m", "oidc_provider_mock", "--host", "127.0.0.1"]
    server = subprocess.Popen(
        [*command, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{base}/.well-known/openid-configuration") as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"oidc-provider-mock did not start (exit {server.poll()})")
            time.sleep(0.2)
        yield base
    finally:
        server.terminate()
        server.wait(timeout=20)


def _secrets(path: Path, *, origin: str, provider: str, cookie_secret: str) -> Path:
    path.write_text(
        "[auth]\n"
        f'redirect_uri = "{origin}/oauth2callback"\n'
        f'cookie_secret = "{cookie_secret}"\n'
        'client_id = "yuxi-dash"\n'
        'client_secret = "yuxi-dash-client-secret"\n'
        f'server_metadata_url = "{provider}/.well-known/openid-configuration"\n',
        encoding="utf-8",
    )
    return path


@pytest.fixture(scope="module")
def deployment(provider: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("oidc")
    env = dashboard_env(
        root,
        YUXI_DASH_AUTH_MODE="oidc",
        YUXI_DASH_ADMINS=ADMIN,
        YUXI_DASH_OPERATORS=OPERATOR,
    )
    ports = {name: free_port() for name in "abc"}
    # the one-shot migration a deployment runs before its replicas start
    upgrade = [*yuxi_dash_command(), "db", "upgrade"]
    subprocess.run(upgrade, cwd=root, env=env, check=True, capture_output=True, timeout=120)
    with ExitStack() as stack:
        forwarder = stack.enter_context(Forwarder(ports["a"]))
        shared = _secrets(
            root / "shared.toml",
            origin=forwarder.origin,
            provider=provider,
            cookie_secret=SHARED_COOKIE_SECRET,
        )
        other = _secrets(
            root / "other.toml",
            origin=forwarder.origin,
            provider=provider,
            cookie_secret=OTHER_COOKIE_SECRET,
        )
        processes = []
        for name, port in ports.items():
            command = [
                *yuxi_dash_command(),
                "serve",
                "--server.address",
                "127.0.0.1",
                "--server.port",
                str(port),
                "--secrets.files",
                str(other if name == "c" else shared),
            ]
            processes.append(stack.enter_context(started(command, cwd=root, env=env)))
        for process in processes:
            wait_until_serving(process)
        yield Deployment(forwarder=forwarder, replicas=ports, provider=provider)


@pytest.fixture
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = launch_chromium(playwright)
        try:
            yield chromium
        finally:
            chromium.close()


def _sign_in(page: object, deployment: Deployment, subject: str) -> None:
    """From the dashboard's refusal page through the provider's login form and back."""
    from playwright.sync_api import expect

    page.goto(deployment.forwarder.origin + "/")
    expect(page.get_by_text("Sign in to use yuxi-dash.")).to_be_visible(timeout=UI_TIMEOUT_MS)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{deployment.provider}/oauth2/authorize*", timeout=UI_TIMEOUT_MS)
    page.locator("input[name=sub]").fill(subject)
    page.get_by_role("button", name="Authorize").click()
    page.wait_for_url(deployment.forwarder.origin + "/**", timeout=UI_TIMEOUT_MS)


def _signed_in_as(page: object) -> object:
    return page.get_by_test_id("stSidebar").get_by_text("Signed in as")


def test_a_listed_user_signs_in_with_the_allowlist_role_and_signs_out(
    deployment: Deployment, browser: object
) -> None:
    from playwright.sync_api import expect

    deployment.forwarder.switch(deployment.replicas["a"])
    context = browser.new_context()
    context.set_default_timeout(UI_TIMEOUT_MS)
    page = context.new_page()
    _sign_in(page, deployment, OPERATOR)
    expect(_signed_in_as(page)).to_have_text(
        f"Signed in as {OPERATOR} · operator · oidc", timeout=UI_TIMEOUT_MS
    )
    expect(page.get_by_role("heading", name="Pressure overview")).to_be_visible(
        timeout=UI_TIMEOUT_MS
    )
    nav = page.get_by_test_id("stSidebarNav")
    expect(nav).to_contain_text("Threads ≥ 85%", timeout=UI_TIMEOUT_MS)
    expect(nav).not_to_contain_text("Audit log")  # admins only
    assert any(c["name"].startswith("_streamlit_user") for c in context.cookies())

    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(f"{deployment.provider}/oauth2/end_session*", timeout=UI_TIMEOUT_MS)
    page.get_by_role("button", name="End session").click()
    expect(page.get_by_text("Sign in to use yuxi-dash.")).to_be_visible(timeout=UI_TIMEOUT_MS)
    assert not any(c["name"].startswith("_streamlit_user") for c in context.cookies())
    page.goto(deployment.forwarder.origin + "/")
    expect(page.get_by_text("Sign in to use yuxi-dash.")).to_be_visible(timeout=UI_TIMEOUT_MS)
    expect(_signed_in_as(page)).to_have_count(0)
    context.close()


def test_a_user_on_no_list_is_refused_after_signing_in(
    deployment: Deployment, browser: object
) -> None:
    from playwright.sync_api import expect

    deployment.forwarder.switch(deployment.replicas["a"])
    context = browser.new_context()
    context.set_default_timeout(UI_TIMEOUT_MS)
    page = context.new_page()
    _sign_in(page, deployment, STRANGER)
    refusal = page.get_by_test_id("stAlert")
    expect(refusal).to_contain_text("is not allowed to use yuxi-dash", timeout=UI_TIMEOUT_MS)
    expect(refusal).to_contain_text(STRANGER)
    expect(page.get_by_test_id("stSidebarNav")).to_have_count(0)
    expect(_signed_in_as(page)).to_have_count(0)
    context.close()


def test_the_same_cookie_secret_keeps_the_session_valid_on_another_replica(
    deployment: Deployment, browser: object
) -> None:
    from playwright.sync_api import expect

    forwarder, replicas = deployment.forwarder, deployment.replicas
    forwarder.switch(replicas["a"])
    first = browser.new_context()
    first.set_default_timeout(UI_TIMEOUT_MS)
    page = first.new_page()
    _sign_in(page, deployment, ADMIN)
    expected = f"Signed in as {ADMIN} · admin · oidc"
    expect(_signed_in_as(page)).to_have_text(expected, timeout=UI_TIMEOUT_MS)
    cookies = first.cookies()
    first.close()

    for replica, signed_in in (("b", True), ("c", False)):
        forwarder.switch(replicas[replica])
        before = forwarder.connections[replicas[replica]]
        fresh = browser.new_context()  # nothing but the copied cookies
        fresh.set_default_timeout(UI_TIMEOUT_MS)
        fresh.add_cookies(cookies)
        page = fresh.new_page()
        page.goto(forwarder.origin + "/")
        if signed_in:
            expect(_signed_in_as(page)).to_have_text(expected, timeout=UI_TIMEOUT_MS)
            expect(page.get_by_test_id("stSidebarNav")).to_contain_text(
                "Audit log", timeout=UI_TIMEOUT_MS
            )
        else:  # another cookie_secret: the cookie does not verify, nobody is signed in
            expect(page.get_by_text("Sign in to use yuxi-dash.")).to_be_visible(
                timeout=UI_TIMEOUT_MS
            )
            expect(_signed_in_as(page)).to_have_count(0)
        assert forwarder.connections[replicas[replica]] > before, f"replica {replica} not reached"
        fresh.close()
