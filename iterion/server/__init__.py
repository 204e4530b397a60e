"""``iterion server``: the HTTP run service and the web timeline over one run store.

``app.py`` the routes (Starlette on uvicorn), ``service.py`` the operations (HTTP-free),
``worker.py`` the detached process that executes a launch or a resume, ``timeline.py`` the
read-only views of a run (executions, boundaries, diffs), ``web.py`` the pages, ``auth.py`` the
token. Nothing here is imported at CLI start-up: only ``iterion server`` loads it.
"""
