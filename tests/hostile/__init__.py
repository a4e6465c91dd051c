"""A hostile client: each probe of the security review, as a test (issue: close the holes)."""
