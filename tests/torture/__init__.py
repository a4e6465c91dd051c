"""Torture tests of the commit path: writer processes under SIGKILL/SIGSTOP, injected storage and
Postgres faults, and a checker that verifies the resulting history (see docs/TORTURE.md)."""
