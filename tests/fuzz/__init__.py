"""Hypothesis fuzzing of every decoder that reads untrusted bytes or names (see docs/TORTURE.md)."""
