"""Paimon's governance model, pure (no database, no HTTP): permissions (resources, accesses, assignments
and the one function that decides), the mapping of the service's read/write/admin bundles onto them, and
the row filters and column masks of Paimon's predicate and transform JSON, parsed, validated and applied
to Arrow data. docs/GOVERNANCE.md describes the protocol and the model."""
