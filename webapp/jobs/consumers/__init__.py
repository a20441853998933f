"""WebSocket streams of job events (see ``routing.py`` for the paths).

``/ws/v1/jobs/<id>``  one job's events; resume with ``?after=<seq>``.
``/ws/v1/tenant``     every event of every job of one tenant (the token's, or for a session
                      ``?tenant=<slug>``, default the user's first); resume with ``?after=<cursor>``.
``/ws/jobs/<id>/``    legacy path of the dashboard: as ``/ws/v1/jobs/<id>``, but one
                      ``{"type": "event", "event": ...}`` frame per event.

v1 frames: ``{"type": "events", "events": [...], "cursor": ...}`` (each event with its
``job_id``; the first frame may have none), ``{"type": "resync", "cursor": ...}`` and, tenant
stream only, ``{"type": "reset", "cursor": ...}``. Close codes: 4400 a query parameter it does
not take or cannot read (the close reason names it), 4401
not authenticated, 4403 not allowed on this tenant, 4404 no such job for this caller, 4429 the
client sent too much or its user already holds ``WS_MAX_SOCKETS_PER_USER`` streams on this
server process, 1011 server error (reconnect with the last cursor).

Each event reaches a client once, and a job's events in seq order:
- a stream joins its channel-layer group *before* reading stored events, so nothing falls in
  between; a live event already sent is recognised by its (job, seq) and dropped;
- the channel layer drops messages when a channel is full: a seq gap in a job's live events is
  filled from the database, and a periodic audit sends stored events that no live message
  announced (a lost last event has no successor to reveal its gap);
- live events wait in a bounded buffer and leave in batches; a client that reads too slowly
  for it loses the buffer, gets ``resync`` and the same events from the database instead.
"""

from webapp.jobs.consumers.job import JobStreamConsumer, LegacyJobStreamConsumer
from webapp.jobs.consumers.tenant import TenantStreamConsumer

__all__ = ["JobStreamConsumer", "LegacyJobStreamConsumer", "TenantStreamConsumer"]
