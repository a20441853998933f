"""The service run on one machine for development: the launcher of its processes (uvicorn,
Celery worker and beat, a Ray head), the demo's jobs and the control-plane benchmark.

Nothing of the service imports it (an import-linter contract holds that): it starts the
service as a deployment would, from outside."""
