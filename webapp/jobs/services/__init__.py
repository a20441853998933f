"""Writes for jobs, by concern: ``submit`` (creating and editing jobs), ``lifecycle`` (status
changes, admission's writes, cancel, pause, resume) and ``engine_events`` (storing what the
engine reports). Side effects (Celery tasks, channel-layer messages) are sent on commit."""
