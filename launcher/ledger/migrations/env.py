"""Alembic environment for the ledger.

At run time launcher.ledger.engine passes an open connection (config.attributes["connection"]),
already holding the migration lock. From the alembic CLI it connects to launcher.paths.db_url().
"""

from __future__ import annotations

from alembic import context

from launcher.ledger.models import metadata

config = context.config


def _run(connection) -> None:  # type: ignore[no-untyped-def]
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",  # SQLite ALTER via table copy
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def main() -> None:
    if context.is_offline_mode():
        from launcher.paths import db_url

        context.configure(url=db_url(), target_metadata=metadata, literal_binds=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    from launcher.ledger.engine import make_engine
    from launcher.paths import db_url

    engine = make_engine(config.get_main_option("sqlalchemy.url") or db_url())
    with engine.connect() as conn:
        _run(conn)
    engine.dispose()


main()
