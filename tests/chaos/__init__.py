"""Chaos tests: a private Postgres cluster restarted (or cut off) under load through service replicas."""
