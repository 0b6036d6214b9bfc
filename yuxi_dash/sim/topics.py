"""What simulated users work on: the topics of their threads, and seeded generators.

Owns `Topic` (what a user asks, the queries and commands the fake model issues
for it, the sentences tool outputs and answers are made of), the six `TOPICS`,
`stable_rng` (a generator that depends only on its parts, so a thread replays
the same way on every machine) and `topic_for` (a thread's topic, by its id).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Topic:
    """One line of work a simulated user pursues with the agent."""

    key: str
    title: str
    asks: tuple[str, ...]
    kb_id: str
    kb_queries: tuple[str, ...]
    web_queries: tuple[str, ...]
    commands: tuple[str, ...]
    files: tuple[str, ...]
    sentences: tuple[str, ...]


TOPICS: tuple[Topic, ...] = (
    Topic(
        key="refunds",
        title="Refund policy for annual plans",
        asks=(
            "Find our refund policy for annual plans and cite the source.",
            "Does the pro-rata rule also apply to plans bought through resellers?",
            "Draft a reply to a customer who asks for a refund after 45 days.",
            "Compare our refund terms with what competitors publish.",
            "Summarise the exceptions the policy allows for enterprise contracts.",
        ),
        kb_id="kb_support",
        kb_queries=(
            "refund policy annual plan",
            "reseller refunds",
            "refund exceptions enterprise",
        ),
        web_queries=("saas annual plan refund policy", "pro rata refund consumer law EU"),
        commands=("grep -rn refund policies/", "python scripts/refund_stats.py --since 2026-01-01"),
        files=("drafts/refund_reply.md", "reports/refund_comparison.md"),
        sentences=(
            "Annual plans can be refunded pro rata within 30 days of purchase.",
            "Refunds after the 30-day window need written approval from the billing lead.",
            "Plans bought through a reseller are refunded by the reseller, not by us.",
            "Enterprise contracts follow the refund terms negotiated in the order form.",
            "Chargebacks are handled by the payments team and close the account automatically.",
            "Monthly plans are not refunded; cancellation takes effect at the end of the period.",
            "Customers in the EU may withdraw within 14 days under the consumer rights directive.",
        ),
    ),
    Topic(
        key="latency",
        title="API latency regression",
        asks=(
            "p95 latency on /v2/search doubled since Tuesday. Find out why.",
            "Run the load test again with the connection pool at 40.",
            "Write up the incident timeline for the postmortem.",
            "Check whether the index on documents.updated_at is being used.",
            "What changed in the deploy on Tuesday afternoon?",
        ),
        kb_id="kb_runbooks",
        kb_queries=(
            "search latency runbook",
            "connection pool sizing",
            "postgres slow query triage",
        ),
        web_queries=("postgres index not used after analyze", "uvicorn worker latency p95"),
        commands=(
            "pytest -q tests/perf",
            "k6 run load/search.js",
            "kubectl logs deploy/search-api",
        ),
        files=("postmortems/2026-11-search-latency.md", "load/search.js"),
        sentences=(
            "The search endpoint fans out to the vector store and the keyword index in parallel.",
            "Connection pool exhaustion shows up as a plateau in p50 and a cliff in p95.",
            "An ANALYZE after the bulk import changed the planner's choice to a sequential scan.",
            "The Tuesday deploy raised the default page size from 20 to 100 results.",
            "Rolling back the page size brought p95 from 840 ms to 310 ms in staging.",
            "Workers were recycled every 500 requests, which cold-starts the embedding cache.",
            "The runbook says to check pg_stat_statements before touching the pool size.",
        ),
    ),
    Topic(
        key="onboarding",
        title="Onboarding checklist for new hires",
        asks=(
            "Put together the onboarding checklist for a backend engineer starting Monday.",
            "Which accounts need manager approval before day one?",
            "Add the security training deadlines to the checklist.",
            "Turn the checklist into a welcome email.",
        ),
        kb_id="kb_hr",
        kb_queries=(
            "onboarding checklist engineering",
            "account approval policy",
            "security training",
        ),
        web_queries=("engineering onboarding best practices", "first week plan software engineer"),
        commands=("python scripts/provision_accounts.py --dry-run", "ls -la templates/onboarding"),
        files=("onboarding/backend_checklist.md", "onboarding/welcome_email.md"),
        sentences=(
            "Laptops are ordered by IT ten working days before the start date.",
            "Production access needs manager approval and a completed security course.",
            "New engineers pair with a buddy for their first two weeks.",
            "Security awareness training is due within 30 days of the start date.",
            "The first-week plan includes a walkthrough of the deploy pipeline.",
            "Payroll forms must be returned before the end of the first month.",
        ),
    ),
    Topic(
        key="pricing",
        title="Pricing page experiment",
        asks=(
            "Analyse the results of the pricing page A/B test.",
            "Is the uplift in the annual toggle statistically significant?",
            "Write the summary for the growth review.",
            "Which segments reacted differently to the new layout?",
        ),
        kb_id="kb_growth",
        kb_queries=(
            "pricing experiment design doc",
            "annual toggle metrics",
            "segment definitions",
        ),
        web_queries=("ab test sequential testing peeking", "pricing page conversion benchmarks"),
        commands=(
            "python analysis/ab_test.py --experiment pricing-v3",
            "duckdb -c 'select * from events'",
        ),
        files=("analysis/pricing_v3_summary.md", "analysis/segments.csv"),
        sentences=(
            "Variant B moved the annual toggle above the fold and pre-selected it.",
            "Conversion to paid rose from 3.1% to 3.4% with a 95% interval of 0.1 to 0.5 points.",
            "The uplift came almost entirely from self-serve teams of two to ten seats.",
            "Enterprise visitors were excluded because they talk to sales.",
            "The test ran for 21 days to cover three full weekly cycles.",
            "Refund requests did not rise in the variant within the observation window.",
        ),
    ),
    Topic(
        key="migration",
        title="Database migration plan",
        asks=(
            "Plan the migration of the orders table to the partitioned schema.",
            "How long will the backfill take at the current write rate?",
            "Write the runbook for the cut-over night.",
            "What is the rollback plan if replication lag spikes?",
            "Check the migration script for locking problems.",
        ),
        kb_id="kb_platform",
        kb_queries=(
            "orders partitioning design",
            "backfill throttling",
            "cutover runbook template",
        ),
        web_queries=(
            "postgres declarative partitioning migration",
            "online schema change lock timeout",
        ),
        commands=(
            "alembic upgrade head --sql",
            "python tools/backfill.py --estimate",
            "psql -c '\\d+ orders'",
        ),
        files=("runbooks/orders_cutover.md", "migrations/0042_partition_orders.py"),
        sentences=(
            "Orders are partitioned by month on created_at with a default partition for stragglers.",
            "The backfill copies 50,000 rows per batch and sleeps when replication lag exceeds 5 s.",
            "Every DDL statement runs with lock_timeout set to 3 seconds and is retried.",
            "The cut-over swaps the view to the partitioned table inside one short transaction.",
            "Rollback keeps the old table in sync through a trigger for seven days.",
            "Foreign keys to orders are recreated as NOT VALID and validated afterwards.",
        ),
    ),
    Topic(
        key="security",
        title="Dependency vulnerability triage",
        asks=(
            "Triage the new critical advisories in our dependency scan.",
            "Which services actually call the vulnerable function?",
            "Open the upgrade plan for the affected services.",
            "Write the note for the security channel.",
        ),
        kb_id="kb_security",
        kb_queries=(
            "vulnerability triage process",
            "dependency upgrade policy",
            "service ownership map",
        ),
        web_queries=(
            "CVE advisory deserialization library",
            "exploitability reachable function analysis",
        ),
        commands=(
            "pip-audit -r requirements.txt",
            "npm audit --json",
            "rg -n 'yaml.load\\(' services/",
        ),
        files=("security/triage_2026-11.md", "security/upgrade_plan.md"),
        sentences=(
            "Critical advisories must be triaged within one working day.",
            "A vulnerability is reachable only if our code calls the affected entry point.",
            "Three services pin the library transitively through the reporting SDK.",
            "The upgrade is a minor version bump with no breaking changes in the changelog.",
            "Services without an owner are escalated to the platform team.",
            "The scanner flags test-only dependencies, which are out of scope for the SLA.",
        ),
    ),
)


def stable_rng(*parts: object) -> random.Random:
    """A random generator whose sequence depends only on `parts` (not on PYTHONHASHSEED)."""
    digest = hashlib.sha256(":".join(str(part) for part in parts).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def topic_for(thread_id: str) -> Topic:
    """The topic a thread is about (stable per thread id)."""
    return TOPICS[stable_rng("topic", thread_id).randrange(len(TOPICS))]
