"""The control plane: Django settings, the Celery app, ASGI routing, the jobs app."""

# Load the Celery app with Django so that ``shared_task.delay`` in any process (web server,
# management commands) sends to the configured broker, not Celery's built-in default.
from webapp.celery_app import app as celery_app

__all__ = ["celery_app"]
