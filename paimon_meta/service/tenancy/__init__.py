"""Many catalogs behind one service (issue 35): which catalog a request's ``{prefix}`` names, each with
its own :class:`~paimon_meta.catalog.metastore.MetastoreCatalog` (warehouse, storage profile, catalog key),
credential vending (its STS role) and change-feed reader."""
