"""The demo's cast and its one story: who the demo users are, and what each tells the assistant.

A leaf: it imports nothing of yuxi_dash. `DEMO_USERS` is the cast (30 user ids).
Each user gets a few *statements* ("I prefer answers in German."):

- the thread seeder puts them into the user's own chat messages (`remark_for`):
  the first turn of each thread states one, every third turn repeats another;
- the graph seeder turns each into a `user_asserted` fact (`Statement.fact_for`)
  in the user's own words, so "Memory vs chat" finds it supported.

It also plants what support staff must spot: a `user_asserted` fact the user
never said (`never_said`) and an `assistant_derived` fact restating the
assistant (`told_fact`).

Everything is a pure function of the user id (a SHA-256 of it picks the values).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

DEMO_USERS: tuple[str, ...] = (
    "alice_chen", "bruno_silva", "chloe_martin", "dmitri_ivanov", "elena_rossi",
    "farah_khan", "gustavo_lima", "hana_sato", "ivan_petrov", "julia_novak",
    "kwame_mensah", "lena_schmidt", "marco_bianchi", "nadia_haddad", "oliver_smith",
    "priya_patel", "quentin_dubois", "rosa_garcia", "samir_aziz", "tara_obrien",
    "umar_farouk", "vera_kowalski", "wei_zhang", "ximena_torres", "yusuf_demir",
    "zoe_muller", "arjun_rao", "bea_lindqvist", "carlos_mendez", "daria_volkova",
)  # fmt: skip

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
    ("OWNS", "Concept", "sailboat Aurora", "{user} owns the sailboat Aurora"),
    ("PLAYS", "Concept", "bagpipes", "{user} plays the bagpipes in a folk band"),
    ("TENDS", "Concept", "rooftop beehives", "{user} tends rooftop beehives as a hobby"),
    ("COLLECTS", "Concept", "vintage typewriters", "{user} collects vintage typewriters"),
    ("SPEAKS", "Concept", "Icelandic", "{user} speaks fluent Icelandic"),
)

_FIRST_LEADS = ("", "For context: ", "Background: ", "")
_LATER_LEADS = ("Also, ", "As I said before, ", "Reminder: ", "One more thing: ")


def pick(user_id: str, salt: str, size: int) -> int:
    """A stable index below `size` for this user and `salt` (the story's only source of choice)."""
    digest = hashlib.sha256(f"yuxi-story:{salt}:{user_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % size


def _all_statements(user_id: str) -> list[Statement]:
    language = _LANGUAGES[pick(user_id, "language", len(_LANGUAGES))]
    region = _REGIONS[pick(user_id, "region", len(_REGIONS))]
    role, team = _ROLES[pick(user_id, "role", len(_ROLES))]
    rule = _RULES[pick(user_id, "rule", len(_RULES))]
    fmt = _FORMATS[pick(user_id, "format", len(_FORMATS))]
    manager = _MANAGERS[pick(user_id, "manager", len(_MANAGERS))]
    tool = _DEPLOY_TOOLS[pick(user_id, "deploy", len(_DEPLOY_TOOLS))]
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
            label="Concept",
            target=region,
            fact=f"{{user}}'s staging cluster is in {region}",
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
    start = pick(user_id, "statements", len(rest))
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


def never_said(user_id: str) -> PlantedFact:
    """The suspect: a user_asserted fact about something the user never said."""
    relation, label, target, fact = _NEVER_SAID[pick(user_id, "never", len(_NEVER_SAID))]
    return PlantedFact(relation, label, target, fact, "user_asserted", "fact")


def told_fact(topic_title: str, claim: str) -> PlantedFact:
    """An assistant_derived fact restating `claim`, which the assistant told the user about a topic.

    Its text names both ends of its triple (the user, WAS_TOLD, the topic).
    """
    claim = claim.rstrip(".").replace("{", "{{").replace("}", "}}")
    title = topic_title.replace("{", "{{").replace("}", "}}")
    return PlantedFact(
        "WAS_TOLD",
        "Project",
        topic_title,
        "{user} was told about " + title + ": " + claim,
        "assistant_derived",
        "finding",
    )
