"""The relational store: SQLAlchemy 2 models, engines and sessions, Alembic migrations, reads.

`db` owns engines/sessions and migrations, `models` the dashboard's tables,
`queries` the read side, `checkpoints` the LangGraph checkpointer that holds
thread state, `state_repository` the service's one way to read and write it.
"""
