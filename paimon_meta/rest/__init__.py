"""The REST wire protocol, once: the URL paths (``paths``) and the request and response bodies
(``models``) that the service (``paimon_meta.service``) serves and the REST catalog client
(``paimon_meta.catalog.rest``) speaks. Nothing here does IO."""
