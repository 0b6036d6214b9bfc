"""The demo's one story: what each demo user tells the assistant, and what memory keeps of it.

Both demo seeders read this module, so a user's chats and their memory graph
agree. For every user id it yields a few *statements* (preferences, rules,
facts about themselves and their work, e.g. "I prefer answers in German.",
"Our staging cluster is eu-west-2."):

- the thread seeder (`yuxi_dash.demo`, through the simulator's human-message
  text) puts them into the user's own chat messages (`remark_for`): the first
  turn of each of the user's threads states one, every third turn after it
  repeats another, so every statement is in every user's chat record;
- the graph seeder (`yuxi_dash.memory.demo`) turns each statement into a
  `user_asserted` fact (`Statement.fact_for`) whose key terms are the user's
  own words, so the "Memory vs chat" page finds it supported.

It also plants what support staff must be able to spot (`planted_facts`): a
`user_asserted` fact about something the user never said (its key terms occur
nowhere in the demo chats: the "I never said that" suspect) and an
`assistant_derived` fact restating what the assistant told the user.

Everything is a pure function of the user id (a SHA-256 of it picks the
values), so any id gets a stable story and the demo users get varied ones.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

STATEMENTS_PER_USER = 5


@dataclass(frozen=True)
class Statement:
    """One thing a user says about themselves, and the fact memory stores from it."""

    key: str  # the kind of statement (one of each per user at most)
    said: str  # the sentence the user writes in chat
    relation: str  # RELATES_TO name, from the user to `target`
    label: str  # the target entity's label
    target: str  # the target entity's name
    fact: str  # the fact text; `{user}` is the user's display name
    memory_kind: str  # the episode envelope's memory_kind

    def fact_for(self, user_name: str) -> str:
        return self.fact.format(user=user_name)


@dataclass(frozen=True)
class PlantedFact:
    """A fact memory holds that the user's own words do not back."""

    relation: str
    label: str
    target: str
    fact: str  # `{user}` is the user's display name
    source_kind: str  # user_asserted (the suspect) or assistant_derived
    memory_kind: str

    def fact_for(self, user_name: str) -> str:
        return self.fact.format(user=user_name)


_LANGUAGES = ("German", "French", "Spanish", "Portuguese", "Italian", "Dutch", "Polish")
_REGIONS = ("eu-west-2", "eu-central-1", "us-east-1", "us-west-2", "ap-southeast-1", "eu-north-1")
_ROLES = (
    ("billing lead", "payments"),
    ("on-call SRE", "search"),
    ("data analyst", "growth"),
    ("release manager", "platform"),
    ("security champion", "identity"),
    ("support engineer", "customer success"),
    ("product manager", "mobile"),
)
_RULES = (
    "deploy on Fridays",
    "paste customer emails into tickets",
    "share API keys in chat",
    "merge without a second review",
    "run migrations during business hours",
    "quote prices without VAT",
)
_FORMATS = (
    "short bullet-point summaries",
    "tables instead of long prose",
    "code samples in Go",
    "diagrams in Mermaid syntax",
    "numbered step-by-step checklists",
)
_MANAGERS = ("Greta Holm", "Tomasz Wrona", "Aiko Mori", "Linnea Berg", "Joaquin Vela")
_DEPLOY_TOOLS = ("Argo CD", "Spinnaker", "Flux", "GitHub Actions", "Jenkins")

# Claims nobody in the demo ever makes: their key terms occur in no demo chat message.
_NEVER_SAID = (
    ("ALLERGIC_TO", "Concept", "peanuts", "{user} is allergic to peanuts"),
    ("OWNS", "Concept", "sailboat Aurora", "{user} owns a sailboat called Aurora"),
    ("PLAYS", "Concept", "bagpipes", "{user} plays the bagpipes in a folk band"),
    ("TENDS", "Concept", "rooftop beehives", "{user} tends rooftop beehives as a hobby"),
    ("COLLECTS", "Concept", "vintage typewriters", "{user} collects vintage typewriters"),
    ("SPEAKS", "Concept", "Icelandic", "{user} speaks fluent Icelandic"),
)

_FIRST_LEADS = ("", "For context: ", "Background: ", "")
_LATER_LEADS = ("Also, ", "As I said before, ", "Reminder: ", "One more thing: ")


def _pick(user_id: str, salt: str, size: int) -> int:
    digest = hashlib.sha256(f"yuxi-story:{salt}:{user_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % size


def _all_statements(user_id: str) -> list[Statement]:
    language = _LANGUAGES[_pick(user_id, "language", len(_LANGUAGES))]
    region = _REGIONS[_pick(user_id, "region", len(_REGIONS))]
    role, team = _ROLES[_pick(user_id, "role", len(_ROLES))]
    rule = _RULES[_pick(user_id, "rule", len(_RULES))]
    fmt = _FORMATS[_pick(user_id, "format", len(_FORMATS))]
    manager = _MANAGERS[_pick(user_id, "manager", len(_MANAGERS))]
    tool = _DEPLOY_TOOLS[_pick(user_id, "deploy", len(_DEPLOY_TOOLS))]
    return [
        Statement(
            key="language",
            said=f"I prefer answers in {language}.",
            relation="PREFERS",
            label="Preference",
            target=f"answers in {language}",
            fact=f"{{user}} prefers answers in {language}",
            memory_kind="preference",
        ),
        Statement(
            key="staging",
            said=f"Our staging cluster is {region}.",
            relation="RUNS_STAGING_IN",
            label="Project",
            target=f"staging cluster {region}",
            fact=f"The staging cluster of {{user}} is {region}",
            memory_kind="fact",
        ),
        Statement(
            key="role",
            said=f"I am the {role} on the {team} team.",
            relation="MEMBER_OF",
            label="Organization",
            target=f"{team} team",
            fact=f"{{user}} is the {role} on the {team} team",
            memory_kind="fact",
        ),
        Statement(
            key="rule",
            said=f"My rule: never {rule}.",
            relation="FOLLOWS_RULE",
            label="Rule",
            target=f"never {rule}",
            fact=f"{{user}} follows the rule: never {rule}",
            memory_kind="rule",
        ),
        Statement(
            key="format",
            said=f"I like {fmt}.",
            relation="PREFERS",
            label="Preference",
            target=fmt,
            fact=f"{{user}} likes {fmt}",
            memory_kind="preference",
        ),
        Statement(
            key="manager",
            said=f"I report to {manager}.",
            relation="REPORTS_TO",
            label="Person",
            target=manager,
            fact=f"{{user}} reports to {manager}",
            memory_kind="fact",
        ),
        Statement(
            key="deploy",
            said=f"Our team deploys with {tool}.",
            relation="USES",
            label="Concept",
            target=tool,
            fact=f"The team of {{user}} deploys with {tool}",
            memory_kind="procedure",
        ),
    ]


def user_statements(user_id: str) -> tuple[Statement, ...]:
    """The user's statements (STATEMENTS_PER_USER of them, always starting with the language)."""
    pool = _all_statements(user_id)
    first, rest = pool[0], pool[1:]
    start = _pick(user_id, "statements", len(rest))
    chosen = [rest[(start + i) % len(rest)] for i in range(STATEMENTS_PER_USER - 1)]
    return (first, *chosen)


def remark_for(user_id: str, thread_ordinal: int, turn: int) -> str | None:
    """What the user adds to their message at `turn` of their `thread_ordinal`-th thread.

    Turn 0 of thread k states statement k (mod the count), so any user with
    STATEMENTS_PER_USER threads says every statement; every third turn repeats
    another. Other turns add nothing (None).
    """
    statements = user_statements(user_id)
    if turn == 0:
        lead = _FIRST_LEADS[thread_ordinal % len(_FIRST_LEADS)]
        index = thread_ordinal
    elif turn % 3 == 2:
        lead = _LATER_LEADS[(thread_ordinal + turn) % len(_LATER_LEADS)]
        index = thread_ordinal + 1 + turn // 3
    else:
        return None
    said = statements[index % len(statements)].said
    if lead and not said.startswith("I "):
        said = said[0].lower() + said[1:]
    return lead + said


def assistant_claim(user_id: str) -> tuple[str, str]:
    """(topic title, a sentence the assistant told this user): its first demo answer's first point.

    Replays the first turn of the user's first demo thread in memory with the
    generator `yuxi_dash.demo` plays that thread with (`stable_rng("demo",
    thread_id)`); a user without demo threads gets a sentence of some topic.
    """
    from langchain_core.messages import AIMessage

    from yuxi_dash.demo import plan_threads
    from yuxi_dash.simulate import (
        TOPICS,
        FakeChatModel,
        ToolOutputs,
        play_turn,
        stable_rng,
        topic_for,
    )

    plan = next((p for p in plan_threads() if p.user_id == user_id), None)
    if plan is None:
        topic = TOPICS[_pick(user_id, "topic", len(TOPICS))]
        return topic.title, topic.sentences[_pick(user_id, "claim", len(topic.sentences))]
    topic = topic_for(plan.thread_id)
    rng = stable_rng("demo", plan.thread_id)
    trace = play_turn(
        [],
        model=FakeChatModel(rng, topic),
        tools=ToolOutputs(rng, topic),
        user_text=topic.asks[0],
    )
    answer = next(
        m for m in reversed(trace.messages) if isinstance(m, AIMessage) and not m.tool_calls
    )
    points = [line[2:] for line in str(answer.content).splitlines() if line.startswith("- ")]
    return topic.title, points[0] if points else topic.sentences[0]


def planted_facts(user_id: str) -> tuple[PlantedFact, ...]:
    """The suspect (user_asserted, never said) and an assistant_derived restatement."""
    relation, label, target, fact = _NEVER_SAID[_pick(user_id, "never", len(_NEVER_SAID))]
    title, claim = assistant_claim(user_id)
    claim = claim.rstrip(".")
    return (
        PlantedFact(relation, label, target, fact, "user_asserted", "fact"),
        PlantedFact(
            "WAS_TOLD",
            "Concept",
            title,
            "{user} was told that " + claim[0].lower() + claim[1:],
            "assistant_derived",
            "finding",
        ),
    )
