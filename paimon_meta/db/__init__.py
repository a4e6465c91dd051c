"""The metastore database: models, engine, migrations, embedded Postgres, LISTEN helpers."""
