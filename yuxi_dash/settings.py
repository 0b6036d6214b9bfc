"""Every knob of yuxi-dash, read from the environment and `.env` (pydantic-settings).

Each field reads the environment variable the README's configuration table
lists. Relative paths are relative to the working directory the process was
started in, so the embedded default keeps everything under `var/`.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from yuxi_dash.agents import DEFAULT_SUMMARY_EVIDENCE_BUDGET_TOKENS

CsvList = Annotated[list[str], NoDecode]


def _env(*names: str) -> AliasChoices:
    return AliasChoices(*names)


class Settings(BaseSettings):
    """Runtime configuration. Construct directly in tests; use `get_settings()` elsewhere."""

    model_config = SettingsConfigDict(
        env_file=".env", extra="ignore", populate_by_name=True, validate_default=True
    )

    # --- store and workdir -------------------------------------------------
    database_url: str = Field(
        "sqlite:///var/yuxi_dash.db", validation_alias=_env("YUXI_DASH_DATABASE_URL")
    )
    workdir: Path = Field(Path("var/workdir"), validation_alias=_env("YUXI_DASH_WORKDIR"))
    lock_timeout_seconds: float = Field(
        5.0, gt=0, validation_alias=_env("YUXI_DASH_LOCK_TIMEOUT_SECONDS")
    )
    cache_ttl_seconds: int = Field(30, ge=0, validation_alias=_env("YUXI_DASH_CACHE_TTL_SECONDS"))
    # an offloaded file younger than this is never swept (a write may be about to commit)
    workdir_sweep_grace_seconds: float = Field(
        3600.0, ge=60, validation_alias=_env("YUXI_DASH_WORKDIR_SWEEP_GRACE_SECONDS")
    )
    # how often `yuxi-dash serve` sweeps (0: never)
    workdir_sweep_seconds: float = Field(
        3600.0, ge=0, validation_alias=_env("YUXI_DASH_WORKDIR_SWEEP_SECONDS")
    )

    # --- an attached platform's LangGraph checkpointer (read-only) ---------
    # a secret (it may hold a password): SecretStr keeps it out of reprs and logs
    attach_checkpointer: SecretStr | None = Field(
        None, validation_alias=_env("YUXI_DASH_ATTACH_CHECKPOINTER")
    )
    attach_scan_seconds: float = Field(
        30.0, gt=0, validation_alias=_env("YUXI_DASH_ATTACH_SCAN_SECONDS")
    )
    # worker processes of a large scan (unset: the usable cores and CPU quota, at most 4);
    # each opens about 4 connections on the platform and 5 on our database
    attach_scan_processes: int | None = Field(
        None, ge=1, le=16, validation_alias=_env("YUXI_DASH_ATTACH_SCAN_PROCESSES")
    )
    # the platform's own volume, where its offloaded results are (unset: the same as ours)
    attach_workdir: Path | None = Field(None, validation_alias=_env("YUXI_DASH_ATTACH_WORKDIR"))

    # --- that platform's compress endpoint (its threads are compressed there) ---
    platform_url: str | None = Field(None, validation_alias=_env("YUXI_DASH_PLATFORM_URL"))
    platform_token: SecretStr | None = Field(
        None, validation_alias=_env("YUXI_DASH_PLATFORM_TOKEN")
    )
    platform_token_file: Path | None = Field(
        None, validation_alias=_env("YUXI_DASH_PLATFORM_TOKEN_FILE")
    )
    platform_connect_timeout_seconds: float = Field(
        5.0, gt=0, validation_alias=_env("YUXI_DASH_PLATFORM_CONNECT_TIMEOUT_SECONDS")
    )
    # one total deadline for a whole compress call: every attempt, its answer and the waits
    platform_deadline_seconds: float = Field(
        120.0, gt=0, validation_alias=_env("YUXI_DASH_PLATFORM_DEADLINE_SECONDS")
    )
    # an http:// URL on a host that is not loopback sends the token in clear: refused unless set
    platform_allow_insecure_http: bool = Field(
        False, validation_alias=_env("YUXI_DASH_PLATFORM_ALLOW_INSECURE_HTTP")
    )

    # --- summarizer (OpenAI-compatible; unset -> offline extractive) -------
    summarizer_base_url: str | None = Field(
        None, validation_alias=_env("YUXI_DASH_SUMMARIZER_BASE_URL")
    )
    summarizer_api_key: str | None = Field(
        None, validation_alias=_env("YUXI_DASH_SUMMARIZER_API_KEY")
    )
    summarizer_model: str | None = Field(None, validation_alias=_env("YUXI_DASH_SUMMARIZER_MODEL"))
    summarizer_timeout_seconds: float = Field(
        60.0, gt=0, validation_alias=_env("YUXI_DASH_SUMMARIZER_TIMEOUT_SECONDS")
    )
    # what a summary keeps in view of the evidence the assistant cited and the user named
    summary_evidence_budget_tokens: int = Field(
        DEFAULT_SUMMARY_EVIDENCE_BUDGET_TOKENS,
        ge=0,
        validation_alias=_env("YUXI_DASH_SUMMARY_EVIDENCE_BUDGET_TOKENS"),
    )

    # --- Graphiti on FalkorDB ---------------------------------------------
    falkordb_host: str | None = Field(None, validation_alias=_env("GRAPHITI_FALKORDB_HOST"))
    falkordb_port: int = Field(6380, validation_alias=_env("GRAPHITI_FALKORDB_PORT"))
    falkordb_password: str | None = Field(None, validation_alias=_env("GRAPHITI_FALKORDB_PASSWORD"))
    falkordb_data_dir: Path = Field(
        Path("var/falkordb"), validation_alias=_env("YUXI_DASH_FALKORDB_DIR")
    )
    falkordb_query_max_attempts: int = Field(
        3, ge=1, validation_alias=_env("GRAPHITI_FALKORDB_QUERY_MAX_ATTEMPTS")
    )
    falkordb_query_backoff_base: float = Field(
        0.1, ge=0, validation_alias=_env("GRAPHITI_FALKORDB_QUERY_BACKOFF_BASE")
    )
    falkordb_query_timeout_ms: int = Field(
        5000, ge=0, validation_alias=_env("YUXI_DASH_FALKORDB_QUERY_TIMEOUT_MS")
    )
    context_max_facts: int = Field(20, ge=1, validation_alias=_env("GRAPHITI_CONTEXT_MAX_FACTS"))
    community_rebuild_min_new_episodes: int = Field(
        5, ge=1, validation_alias=_env("GRAPHITI_COMMUNITY_REBUILD_MIN_NEW_EPISODES")
    )
    redis_url: str | None = Field(None, validation_alias=_env("YUXI_DASH_REDIS_URL"))

    # --- alerts: Alertmanager, the signed webhook, the dashboard's public address ---
    alertmanager_url: str | None = Field(None, validation_alias=_env("YUXI_DASH_ALERTMANAGER_URL"))
    alert_webhook_url: str | None = Field(
        None, validation_alias=_env("YUXI_DASH_ALERT_WEBHOOK_URL")
    )
    alert_webhook_secret: SecretStr | None = Field(
        None, validation_alias=_env("YUXI_DASH_ALERT_WEBHOOK_SECRET")
    )
    public_url: str = Field("http://localhost:8501", validation_alias=_env("YUXI_DASH_PUBLIC_URL"))
    # `serve`'s background pass: evaluate (a pending alert fires with no new write) and send
    alert_evaluate_seconds: float = Field(
        30.0, ge=0, validation_alias=_env("YUXI_DASH_ALERT_EVALUATE_SECONDS")
    )  # 0: no background pass (run `yuxi-dash alerts evaluate` from cron instead)
    # one total deadline for a channel's posts in one pass (Alertmanager, the webhook)
    alert_deadline_seconds: float = Field(
        10.0, gt=0, validation_alias=_env("YUXI_DASH_ALERT_DEADLINE_SECONDS")
    )
    # the `agent` label (/metrics, Alertmanager) names the top N agents by threads, then "other"
    label_agents_max: int = Field(20, ge=1, validation_alias=_env("YUXI_DASH_LABEL_AGENTS_MAX"))

    # --- model cost: a JSON prices file (docs/operations.md); unset: tokens only, no dollars ---
    model_prices: Path | None = Field(None, validation_alias=_env("YUXI_DASH_MODEL_PRICES"))

    # --- LaunchDarkly -------------------------------------------------------
    launchdarkly_sdk_key: str | None = Field(None, validation_alias=_env("LAUNCHDARKLY_SDK_KEY"))
    ld_flags_file: Path | None = Field(None, validation_alias=_env("YUXI_DASH_LD_FLAGS_FILE"))
    memory_flag_key: str = Field(
        "graphiti-memory", validation_alias=_env("YUXI_DASH_MEMORY_FLAG_KEY")
    )
    communities_flag_key: str = Field(
        "graphiti-communities-enabled", validation_alias=_env("YUXI_DASH_COMMUNITIES_FLAG_KEY")
    )

    # --- identity and roles -------------------------------------------------
    auth_mode: Literal["local", "oidc", "proxy"] = Field(
        "local", validation_alias=_env("YUXI_DASH_AUTH_MODE")
    )
    local_operator: str = Field(
        "operator@localhost", validation_alias=_env("YUXI_DASH_LOCAL_OPERATOR")
    )
    proxy_user_header: str = Field(
        "X-Forwarded-Email", validation_alias=_env("YUXI_DASH_PROXY_USER_HEADER")
    )
    proxy_secret_header: str = Field(
        "X-Yuxi-Proxy-Secret", validation_alias=_env("YUXI_DASH_PROXY_SECRET_HEADER")
    )
    proxy_secret: str | None = Field(None, validation_alias=_env("YUXI_DASH_PROXY_SECRET"))
    viewer_emails: CsvList = Field(default_factory=list, validation_alias=_env("YUXI_DASH_VIEWERS"))
    operator_emails: CsvList = Field(
        default_factory=list, validation_alias=_env("YUXI_DASH_OPERATORS")
    )
    admin_emails: CsvList = Field(default_factory=list, validation_alias=_env("YUXI_DASH_ADMINS"))
    viewer_domains: CsvList = Field(
        default_factory=list, validation_alias=_env("YUXI_DASH_VIEWER_DOMAINS")
    )
    operator_domains: CsvList = Field(
        default_factory=list, validation_alias=_env("YUXI_DASH_OPERATOR_DOMAINS")
    )
    admin_domains: CsvList = Field(
        default_factory=list, validation_alias=_env("YUXI_DASH_ADMIN_DOMAINS")
    )

    # --- the command line ---------------------------------------------------
    cli_role: Literal["viewer", "operator", "admin"] = Field(
        "operator", validation_alias=_env("YUXI_DASH_CLI_ROLE")
    )
    cli_actor: str | None = Field(None, validation_alias=_env("YUXI_DASH_CLI_ACTOR"))

    # --- the HTTP API (`yuxi-dash api serve`) --------------------------------
    # a bind address that is not loopback is refused unless this opts in
    api_allow_network: bool = Field(False, validation_alias=_env("YUXI_DASH_API_ALLOW_NETWORK"))
    # a connection that has not sent a request's complete headers by then is closed
    api_header_timeout_seconds: float = Field(
        10.0, gt=0, le=300, validation_alias=_env("YUXI_DASH_API_HEADER_TIMEOUT_SECONDS")
    )
    # open connections at most; a request past it is answered 503
    api_max_connections: int = Field(
        64, ge=1, le=10_000, validation_alias=_env("YUXI_DASH_API_MAX_CONNECTIONS")
    )

    @field_validator(
        "viewer_emails",
        "operator_emails",
        "admin_emails",
        "viewer_domains",
        "operator_domains",
        "admin_domains",
        mode="before",
    )
    @classmethod
    def _split_csv(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip().lower() for part in value.split(",") if part.strip()]
        return value

    @field_validator("attach_workdir", "model_prices", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("cli_role", mode="before")
    @classmethod
    def _lower_role(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @property
    def summarizer_configured(self) -> bool:
        return bool(self.summarizer_base_url and self.summarizer_model)

    def workdir_for(self, origin: str) -> Path:
        """Where a thread's offloaded files resolve: the attached platform's volume for its
        threads (``origin`` "attached") when `attach_workdir` is set, else our workdir."""
        if origin == "attached" and self.attach_workdir is not None:
            return self.attach_workdir
        return self.workdir

    @property
    def attach_configured(self) -> bool:
        return bool(self.attach_checkpointer and self.attach_checkpointer.get_secret_value())

    @property
    def platform_configured(self) -> bool:
        return bool(self.platform_url and self.platform_url.strip())

    @property
    def falkordb_embedded(self) -> bool:
        return not self.falkordb_host


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings; tests call `get_settings.cache_clear()` after changing env."""
    return Settings()
