"""The operator console at ``/ui``: server-rendered pages (Jinja2), htmx and uPlot served by the
service itself, signed in with the same tokens and grants as the API (README "The console")."""
