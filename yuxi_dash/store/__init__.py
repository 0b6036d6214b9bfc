"""The relational store: SQLAlchemy 2 models, engines and sessions, Alembic migrations, reads.

`db` owns engines/sessions and migrations, `models` the dashboard's tables,
`queries` the read side, `checkpointer` the LangGraph checkpointer that holds
thread state, `thread_store` the service's one way to read and write it.
"""
