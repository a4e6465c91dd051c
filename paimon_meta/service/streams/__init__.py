"""Live streams of the service (the change feed's SSE route, the console's live view): the slots they take
on a replica and the rights of their principals, re-checked while they are open (README "Live streams")."""
