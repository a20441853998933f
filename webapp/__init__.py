"""The control plane: Django settings, the Celery app, ASGI routing, the jobs app."""
