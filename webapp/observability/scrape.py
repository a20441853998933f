"""``GET /metrics``: what the processes recorded, plus what is read when Prometheus asks (jobs by
state, the queue per tenant, Celery's queue depth, the engine's devices).

Not public: a caller needs ``Authorization: Bearer <METRICS_TOKEN>`` or an address inside
``METRICS_ALLOWED_NETWORKS``; others get 401 or 403 in the API's error shape."""

from __future__ import annotations

import hmac
import ipaddress
import logging
import time
from collections.abc import Iterator

from django.conf import settings
from django.db.models import Count, Min
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET
from kombu.exceptions import ChannelError
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from webapp import engine_gateway
from webapp.api.errors import error_body
from webapp.jobs.models import Job, JobStatus
from webapp.observability.metrics import MULTIPROCESS

logger = logging.getLogger(__name__)


class ControlPlaneCollector(Collector):
    """Read at scrape time, from the database, the broker and the engine."""

    def collect(self) -> Iterator[Metric]:
        yield from self._jobs()
        yield from self._queues()
        yield from self._celery_queue()
        yield from self._engine()

    def _jobs(self) -> Iterator[Metric]:
        by_state = dict.fromkeys(JobStatus.values, 0)
        rows = Job.objects.order_by().values_list("status").annotate(n=Count("pk"))
        by_state.update({status: n for status, n in rows})
        jobs = GaugeMetricFamily("jigsaw_jobs", "Jobs by state.", labels=["state"])
        for state, n in sorted(by_state.items()):
            jobs.add_metric([state], n)
        yield jobs

    def _queues(self) -> Iterator[Metric]:
        """Jobs waiting for admission (queued, not yet given capacity), per tenant."""
        waiting = (
            Job.objects.filter(status=JobStatus.QUEUED, admitted_at__isnull=True)
            .order_by()
            .values_list("tenant__slug")
            .annotate(n=Count("pk"), oldest=Min("created_at"))
        )
        length = GaugeMetricFamily("jigsaw_tenant_queue_length", "Jobs waiting for admission.", labels=["tenant"])
        wait = GaugeMetricFamily(
            "jigsaw_tenant_queue_oldest_wait_seconds",
            "How long the tenant's longest-waiting queued job has waited.",
            labels=["tenant"],
        )
        now = time.time()
        for tenant, n, oldest in waiting:
            length.add_metric([tenant], n)
            wait.add_metric([tenant], max(0.0, now - oldest.timestamp()))
        yield length
        yield wait

    def _celery_queue(self) -> Iterator[Metric]:
        from webapp.celery_app import app

        if app.conf.task_always_eager:
            return  # standalone: tasks run in the caller, there is no queue
        queue = app.conf.task_default_queue
        try:
            with app.connection_for_read() as conn:
                # Kombu's Redis transport counts the queue's list of every priority step.
                depth = conn.default_channel.queue_declare(queue=queue, passive=True).message_count
        except ChannelError:
            depth = 0  # not declared yet: no task was ever sent to it, and no worker reads it
        except Exception as exc:  # a broker that does not answer leaves the series out
            logger.warning("metrics: the broker did not answer: %s", exc)
            return
        family = GaugeMetricFamily(
            "jigsaw_celery_queue_depth", "Tasks waiting in Celery's queue, not yet taken by a worker.", labels=["queue"]
        )
        family.add_metric([queue], depth)
        yield family

    def _engine(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("jigsaw_engine_up", "Whether the engine answered this scrape.")
        try:
            cluster = engine_gateway.describe_engine()["cluster"]
        except Exception as exc:  # an unreachable engine is a value to report, not a failed scrape
            logger.warning("metrics: the engine did not answer: %s", exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        total = int(cluster.get("num_devices") or 0)
        in_use = int(cluster.get("devices_in_use") or 0)
        lost = len(cluster.get("lost_devices") or ())
        devices = GaugeMetricFamily(
            "jigsaw_engine_devices", "The engine's devices, by state.", labels=["state", "device_type"]
        )
        kind = str(cluster.get("device_type", ""))
        devices.add_metric(["total", kind], total)
        devices.add_metric(["in_use", kind], in_use)
        devices.add_metric(["lost", kind], lost)
        yield devices
        yield GaugeMetricFamily(
            "jigsaw_engine_device_utilisation",
            "Devices in use over the devices the engine has (0 to 1).",
            value=in_use / total if total else 0.0,
        )


def _allowed_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    return [ipaddress.ip_network(n, strict=False) for n in settings.METRICS_ALLOWED_NETWORKS]


def _needs_token(code: str, message: str) -> HttpResponse:
    fix = {"field": "Authorization", "message": "send Authorization: Bearer <METRICS_TOKEN>"}
    answer = JsonResponse(error_body(code, message, [fix]), status=401)
    answer["WWW-Authenticate"] = 'Bearer realm="metrics"'
    return answer


def _refusal(request: HttpRequest) -> HttpResponse | None:
    token = settings.METRICS_TOKEN
    sent = request.headers.get("Authorization", "")
    if sent:
        scheme, _, value = sent.partition(" ")
        if token and scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), token.encode()):
            return None
        return _needs_token("authentication_failed", "the metrics token is not valid")
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        address = None
    if address is not None and any(address in net for net in _allowed_networks()):
        return None
    if token:
        return _needs_token("not_authenticated", "metrics need a token from this address")
    return JsonResponse(
        error_body(
            "permission_denied",
            f"metrics are not served to {request.META.get('REMOTE_ADDR', 'this address')}",
            [{"field": "METRICS_ALLOWED_NETWORKS", "message": "add the scraper's network, or set METRICS_TOKEN"}],
        ),
        status=403,
    )


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    refused = _refusal(request)
    if refused is not None:
        return refused
    live = CollectorRegistry()
    live.register(ControlPlaneCollector())
    if MULTIPROCESS:
        from prometheus_client import multiprocess

        recorded = CollectorRegistry()
        multiprocess.MultiProcessCollector(recorded)
    else:
        recorded = REGISTRY
    return HttpResponse(generate_latest(recorded) + generate_latest(live), content_type=CONTENT_TYPE_LATEST)
