"""The relational store: SQLAlchemy 2 models, engines and sessions, Alembic migrations, reads.

`db` owns engines/sessions and migrations, `models` the dashboard's tables,
`queries` the read side, `state_repository` the only writer of `thread_states`.
"""
