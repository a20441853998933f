"""The control-plane benchmark and soak (``scripts/bench_control_plane.py``): the real stack
on loopback, driven by real HTTP and WebSocket clients.

``config`` (options, constants, the stack's environment), ``store`` (its own database and Redis
keys), ``django_steps`` (seeding, table fills and the event publisher, in child processes),
``servers`` (uvicorn and the Celery worker, through :mod:`devstack.launcher`), ``http_load``
and ``ws_load`` (the clients), ``resources`` (CPU, memory, database sessions), ``stats``
(percentiles and windows), ``phases`` and ``soak`` (the measured loads), ``report`` (the
summary and verdicts)."""
