from django.urls import re_path

from webapp.jobs.consumers import JobStreamConsumer, LegacyJobStreamConsumer, TenantStreamConsumer

JOB_ID = r"(?P<job_id>[0-9a-fA-F-]{32,36})"

websocket_urlpatterns = [
    re_path(rf"^ws/v1/jobs/{JOB_ID}/?$", JobStreamConsumer.as_asgi()),
    re_path(r"^ws/v1/tenant/?$", TenantStreamConsumer.as_asgi()),
    # The dashboard's path (frontend/src/live/jobStream.ts), with its one-event frames.
    re_path(rf"^ws/jobs/{JOB_ID}/$", LegacyJobStreamConsumer.as_asgi()),
]
