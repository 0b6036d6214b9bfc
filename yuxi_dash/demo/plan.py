"""The demo's threads as a plan, and what their first answers told each user.

Owns the shape of the demo: about 200 threads (`demo-NNN`) over the cast and
the simulator's three agents, each a pure function of its number (`ThreadPlan`:
user, agent, status, busy reason, the pressure band it ends in, how long before
the anchor its last activity is at the latest). Per 25 threads one is running, one queued and one
interrupted; per 40 one is deleted and one archived.

`demo_user_text` is what a thread's user writes at each turn. `first_exchanges`
replays the first turn of each of a user's threads (their message and the
assistant's answer, word for word as the chat record holds them): the graph
seeder builds the user's memory from them. `planted_facts` are the
`user_asserted` fact the user never said and the `assistant_derived` fact
restating the first point of their first answer (`assistant_claim`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage

from yuxi_dash.compression import message_text
from yuxi_dash.sim.loop import SIM_AGENTS
from yuxi_dash.sim.model import SimChatModel, user_message
from yuxi_dash.sim.story import (
    DEMO_USERS,
    STATEMENTS_PER_USER,
    PlantedFact,
    never_said,
    remark_for,
    told_fact,
)
from yuxi_dash.sim.topics import stable_rng, topic_for
from yuxi_dash.usage import SUGGESTION_RATIO

DEMO_PREFIX = "demo-"
DEMO_MODEL_SEED = "demo"  # the seed of every demo thread's model (with the thread id)
DEMO_THREADS = 196  # plus the live simulated ones: about 200
LIVE_THREADS = 4
LIVE_TURNS = 4
LIVE_SEED = 2026
DEMO_OPERATOR = "ops.lead@example.com"
MANUAL_COMPRESSIONS = 8
MAX_TURNS = 10
OVERSHOOT_TURNS = 3  # turns a thread plays past its minimum trying to land in its band

# (status kind, how many) laid out over the thread numbers by _status_for
_BUSY_EVERY = 25  # per 25 threads: one running, one queued, one interrupted
_LIFECYCLE_EVERY = 40  # per 40 threads: one deleted, one archived

# pressure bands (low, high) and their weights; "over" only for agents without
# compression (the others summarize at the threshold) and for busy threads
_BANDS: tuple[tuple[str, float, float, int], ...] = (
    ("low", 0.04, 0.40, 30),
    ("mid", 0.40, 0.70, 24),
    ("warm", 0.70, SUGGESTION_RATIO, 16),
    ("high", SUGGESTION_RATIO, 1.00, 14),
    ("over", 1.00, 1.35, 8),
)


@dataclass(frozen=True)
class ThreadPlan:
    """What one demo thread will look like (a pure function of its number)."""

    number: int
    thread_id: str
    user_id: str
    agent_slug: str
    status: str  # active | archived | deleted
    busy: str | None  # running | queued | interrupted | None
    band: tuple[float, float]
    min_turns: int  # long-running threads go round the sawtooth several times
    recency: timedelta  # its last activity is at least this long before the anchor
    ordinal: int = 0  # this is the user's ordinal-th demo thread (0-based): picks their remarks


def _status_for(number: int) -> tuple[str, str | None]:
    slot = number % _BUSY_EVERY
    busy = {3: "running", 11: "queued", 19: "interrupted"}.get(slot)
    if busy:
        return "active", busy
    life = number % _LIFECYCLE_EVERY
    return {7: "deleted", 27: "archived"}.get(life, "active"), None


def plan_threads(count: int = DEMO_THREADS) -> list[ThreadPlan]:
    """The demo's threads, deterministic."""
    plans = []
    per_user: dict[str, int] = {}
    for number in range(count):
        thread_id = f"{DEMO_PREFIX}{number:03d}"
        rng = stable_rng("demo-plan", thread_id)
        agent = SIM_AGENTS[(0, 0, 0, 0, 1, 1, 1, 1, 2, 2)[number % 10]]
        status, busy = _status_for(number)
        bands = [band for band in _BANDS if band[0] != "over" or not agent.capable or busy]
        _, low, high, _ = rng.choices(bands, weights=[band[3] for band in bands])[0]
        if busy in ("running", "interrupted") and agent.capable:
            low, high = 0.0, 9.0  # mid-turn: wherever the pending tool results leave it
        hours = rng.choice((0.2, 0.5, 1, 2, 3, 5, 8, 12, 20, 30, 48, 72, 120, 200, 300, 450))
        recency = timedelta(hours=hours * (0.6 + rng.random() * 0.8))
        if busy == "running":
            recency = timedelta(seconds=rng.randint(5, 120))
        user_id = DEMO_USERS[(number * 7 + number // 30) % len(DEMO_USERS)]
        ordinal = per_user.get(user_id, 0)
        per_user[user_id] = ordinal + 1
        plans.append(
            ThreadPlan(
                number=number,
                thread_id=thread_id,
                user_id=user_id,
                agent_slug=agent.slug,
                status=status,
                busy=busy,
                band=(low, high),
                min_turns=rng.randint(4, 7) if agent.capable and rng.random() < 0.2 else 1,
                recency=recency,
                ordinal=ordinal,
            )
        )
    return plans


def demo_user_text(plan: ThreadPlan, turn: int) -> str:
    """What the user of ``plan``'s thread writes at ``turn`` (their story's remark included)."""
    return user_message(
        stable_rng("demo", plan.thread_id, "user", turn),
        topic_for(plan.thread_id),
        turn,
        remark_for(plan.user_id, plan.ordinal, turn),
    )


@dataclass(frozen=True)
class FirstExchange:
    """The first turn of one of a user's demo threads, word for word as its chat record holds it."""

    thread_id: str
    ordinal: int  # the user's ordinal-th demo thread: which statement the message carries
    topic_title: str
    asked: str  # the user's first message
    answer: str  # the assistant's first text answer
    points: tuple[str, ...]  # the answer's bullet points, in order
    plan: ThreadPlan  # the thread (its story clock says when the first message was written)
    in_record: bool  # a demo thread's (its messages are in the chat record), not a stand-in's


def first_answer(plan: ThreadPlan) -> str:
    """The assistant's text answer to the first turn of ``plan``'s thread.

    Replays the model's side of that turn (`SimChatModel` with the demo's seed):
    the model's choices do not depend on the tools' outputs (`view_digest`), so
    the tool results are left empty and nothing runs or is written.
    """
    model = SimChatModel(seed=DEMO_MODEL_SEED)
    messages: list[BaseMessage] = [HumanMessage(demo_user_text(plan, 0))]
    reply = model.reply(plan.thread_id, messages)
    while reply.tool_calls:
        messages.append(reply)
        messages.extend(
            ToolMessage("", tool_call_id=call["id"], name=call["name"]) for call in reply.tool_calls
        )
        reply = model.reply(plan.thread_id, messages)
    return message_text(reply)


def _stand_in_plans(user_id: str) -> list[ThreadPlan]:
    """Threads a user outside the cast would have had (for graphs of ids without demo threads)."""
    agent = SIM_AGENTS[0].slug
    return [
        ThreadPlan(
            number=0,
            thread_id=f"{user_id}-t{ordinal + 1}",
            user_id=user_id,
            agent_slug=agent,
            status="active",
            busy=None,
            band=(0.0, 1.0),
            min_turns=1,
            recency=timedelta(),
            ordinal=ordinal,
        )
        for ordinal in range(STATEMENTS_PER_USER)
    ]


def first_exchanges(user_id: str) -> list[FirstExchange]:
    """The first turn of each of the user's demo threads that is still in the chat record.

    Every demo thread plays its first turn to the end, so these messages are in
    the record; deleted threads are left out (their messages are not shown). A
    user without demo threads gets stand-in threads (`<user>-t1`...).
    """
    cast = [p for p in plan_threads() if p.user_id == user_id]
    plans = cast or _stand_in_plans(user_id)
    out = []
    for plan in plans:
        if plan.status == "deleted":
            continue
        answer = first_answer(plan)
        points = [line[2:] for line in answer.splitlines() if line.startswith("- ")]
        out.append(
            FirstExchange(
                thread_id=plan.thread_id,
                ordinal=plan.ordinal,
                topic_title=topic_for(plan.thread_id).title,
                asked=demo_user_text(plan, 0),
                answer=answer,
                points=tuple(points),
                plan=plan,
                in_record=bool(cast),
            )
        )
    return out


def assistant_claim(user_id: str) -> tuple[str, str]:
    """(topic title, a sentence the assistant told this user): the first point of the first
    answer of their first thread still in the record."""
    first = first_exchanges(user_id)[0]
    return first.topic_title, first.points[0] if first.points else first.answer


def planted_facts(user_id: str) -> tuple[PlantedFact, PlantedFact]:
    """The suspect (user_asserted, never said) and an assistant_derived restatement."""
    title, claim = assistant_claim(user_id)
    return never_said(user_id), told_fact(title, claim)
