from django.urls import re_path

from webapp.jobs.consumers import JobEventsConsumer

websocket_urlpatterns = [
    re_path(r"^ws/jobs/(?P<job_id>[0-9a-fA-F-]{32,36})/$", JobEventsConsumer.as_asgi()),
]
