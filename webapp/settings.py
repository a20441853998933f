"""Settings: every value that varies between machines comes from the environment, here only.

``JIGSAW_ENV``: ``development`` (default), ``test`` or ``production``. Production refuses to
start with a default secret and turns on the secure-cookie and HSTS settings that
``manage.py check --deploy`` asks for. ``JIGSAW_STANDALONE=1`` runs without Postgres and
Redis (SQLite, tasks in-process, in-memory channel layer) for a single-process demo.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from webapp.env import env_bool, env_float, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
JIGSAW_ENV = env_str("JIGSAW_ENV", "development")
if JIGSAW_ENV not in ("development", "test", "production"):
    raise ImproperlyConfigured(f"JIGSAW_ENV: must be development, test or production, got {JIGSAW_ENV!r}")
PRODUCTION = JIGSAW_ENV == "production"
STANDALONE = env_bool("JIGSAW_STANDALONE", False)

_DEV_SECRET = "dev-insecure-secret-key-change-me-dev-insecure-secret-key"
SECRET_KEY = env_str("SECRET_KEY", _DEV_SECRET)
if PRODUCTION and (SECRET_KEY == _DEV_SECRET or len(SECRET_KEY) < 50):
    raise ImproperlyConfigured(
        "SECRET_KEY: production needs its own secret of at least 50 characters; "
        "set SECRET_KEY in the environment (e.g. python -c "
        "'import secrets; print(secrets.token_urlsafe(64))')"
    )
if PRODUCTION and os.environ.get("JIGSAW_FAILPOINTS"):
    raise ImproperlyConfigured("JIGSAW_FAILPOINTS: fault injection is for test runs; unset it in production")
DEBUG = env_bool("DEBUG", not PRODUCTION)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", [] if PRODUCTION else ["localhost", "127.0.0.1", "[::1]", "testserver"])
if PRODUCTION and not ALLOWED_HOSTS:
    raise ImproperlyConfigured("ALLOWED_HOSTS: production needs the host names it serves, comma separated")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "django_filters",
    "channels",
    "tenants",
    "webapp.jobs",
    "webapp.datasets",
    "webapp.webhooks",
]

MIDDLEWARE = [
    "webapp.observability.middleware.RequestMetricsMiddleware",  # first: times what the client gets
    "webapp.api.errors.ApiErrorMiddleware",  # outermost: sees every response, debug pages included
    "webapp.observability.middleware.RequestContextMiddleware",  # the ids every log line carries
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "webapp.api.request_limits.RequestLimitsMiddleware",  # before CSRF, which may read the body
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "webapp.login_throttle.LoginThrottleMiddleware",  # after sessions and CSRF: it reads the form
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "webapp.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "webapp" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
WSGI_APPLICATION = "webapp.wsgi.application"
ASGI_APPLICATION = "webapp.asgi.application"

# -- data stores ----------------------------------------------------------------------------
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/jigsawrl"
if STANDALONE:
    STANDALONE_DB = env_str("STANDALONE_DB", str(BASE_DIR / "var" / "standalone.sqlite3"))
    # The request threads and the event-pump thread all write: IMMEDIATE transactions take the
    # write lock up front (a deferred one upgrading from read fails at once with "database is
    # locked"), and a writer waits up to 20 s for the lock instead of 5.
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": STANDALONE_DB,
            "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 20},
        }
    }
else:
    # A connection pool per process, not persistent connections: under ASGI every request runs
    # in a fresh thread, so a per-thread connection is opened per request and lingers until
    # garbage collection (a benchmark at 50 clients ran Postgres out of connections). A pooled
    # connection is checked as it is taken (one empty round trip): after a PostgreSQL restart
    # every idle one in the pool is dead, and a Celery pool process's pool outlives its tasks.
    DATABASES = {
        "default": dj_database_url.parse(
            env_str("DATABASE_URL", DEFAULT_DATABASE_URL), conn_max_age=0, conn_health_checks=True
        )
    }
    DATABASES["default"]["OPTIONS"] = {
        "pool": {
            "min_size": int(env_float("DB_POOL_MIN", 4)),
            "max_size": int(env_float("DB_POOL_MAX", 10)),
            "timeout": env_float("DB_POOL_TIMEOUT_S", 10.0),
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_str("REDIS_URL", "redis://127.0.0.1:6379/0")
if STANDALONE:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
else:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # redis-py's default read timeout (5 s) equals channels_redis's blocking pop (5 s):
            # a receive idle for 5 s raised TimeoutError and killed the WebSocket consumer.
            "CONFIG": {
                "hosts": [{"address": REDIS_URL, "socket_timeout": 15}],
                "prefix": env_str("CHANNELS_PREFIX", "jigsaw"),
            },
        }
    }
# Throttle counters must be shared by every server process: Redis, except standalone.
if not STANDALONE:
    CACHES = {
        "default": {
            "BACKEND": "webapp.redis_cache.SharedRedisCache",  # one connection pool per process
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": env_str("CACHE_PREFIX", "jigsaw"),
        }
    }

# -- Celery ---------------------------------------------------------------------------------
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", REDIS_URL)
CELERY_RESULT_BACKEND = None
CELERY_TASK_ALWAYS_EAGER = STANDALONE
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_QUEUE", "jigsaw")
# Ray cannot write to Celery's redirected stdout inside a prefork child.
CELERY_WORKER_REDIRECT_STDOUTS = False
CELERY_WORKER_HIJACK_ROOT_LOGGER = False  # the worker logs through LOGGING below, as web does
CELERY_BEAT_SCHEDULE = {
    "pump-engine-events": {"task": "jobs.pump_engine_events", "schedule": 1.0},
    "admission-tick": {"task": "jobs.admission_tick", "schedule": 2.0},
    "reconcile": {"task": "jobs.reconcile", "schedule": env_float("RECONCILE_EVERY_S", 10.0)},
    "webhooks-sweep": {"task": "webhooks.sweep", "schedule": 5.0},
    # Ended jobs past their tenant's retention (Tenant.job_retention_days) are deleted.
    "job-retention": {"task": "jobs.retention_sweep", "schedule": env_float("JOB_RETENTION_EVERY_S", 3600.0)},
}
# An admitted job the engine has not heard of after this long had its dispatch lost.
RECONCILE_DISPATCH_GRACE_S = env_float("RECONCILE_DISPATCH_GRACE_S", 30.0)

HTTP_KEEP_ALIVE_S = int(env_float("UVICORN_TIMEOUT_KEEP_ALIVE", 65))
"""How long ``manage.py serve`` keeps an idle keep-alive connection (the image sets the same
for the uvicorn CLI). uvicorn's 5 s default raced clients that send every 5 s: the server closed
the connection as their next request went out (a reset, not an answer)."""

# -- engine ---------------------------------------------------------------------------------
WS_MAX_SOCKETS_PER_USER = int(env_float("WS_MAX_SOCKETS_PER_USER", 100))
"""Event streams one user may hold open on one server process (0: no limit); more close 4429."""
if WS_MAX_SOCKETS_PER_USER < 0:
    raise ImproperlyConfigured(f"WS_MAX_SOCKETS_PER_USER: must be >= 0 (0 = no limit), got {WS_MAX_SOCKETS_PER_USER}")

GC_FREEZE_AFTER_STARTUP = env_bool("GC_FREEZE_AFTER_STARTUP", True)
"""Move start-up's objects out of the garbage collector's full passes (``webapp/gc_tuning.py``)."""

ENGINE_BACKEND = env_str("ENGINE_BACKEND", "local")  # local | ray
if ENGINE_BACKEND not in ("local", "ray"):
    raise ImproperlyConfigured(f"ENGINE_BACKEND: must be local or ray, got {ENGINE_BACKEND!r}")
RAY_ADDRESS = env_str("RAY_ADDRESS", "")
ENGINE_CLUSTER = {
    "num_nodes": int(env_float("ENGINE_NUM_NODES", 1)),
    "devices_per_node": int(env_float("ENGINE_DEVICES_PER_NODE", 8)),
    "device_type": env_str("ENGINE_DEVICE_TYPE", "h100"),
}
ENGINE_SPEED = env_float("ENGINE_SPEED", 20.0)
ENGINE_MODE = env_str("ENGINE_MODE", "simulated")  # simulated | real (tiny models on this machine's cores)
if ENGINE_MODE not in ("simulated", "real"):
    raise ImproperlyConfigured(f"ENGINE_MODE: must be simulated or real, got {ENGINE_MODE!r}")
ENGINE_REAL_CACHE_DIR = env_str("ENGINE_REAL_CACHE_DIR", str(BASE_DIR / "var" / "policy-cache"))
# Real jobs checkpoint after every step, here (<dir>/<job id>/step-NNNNNN): what pause, clone
# and recovery after an engine restart resume from. Empty: no checkpoints (nothing survives).
ENGINE_REAL_CHECKPOINT_DIR = env_str("ENGINE_REAL_CHECKPOINT_DIR", str(BASE_DIR / "var" / "real-checkpoints"))
"""Simulated seconds per wall second for simulated pipelines (``inf`` in tests)."""
# Folders a job's checkpoint (`model: {path: ...}`) may be in: mounted model stores. A path
# elsewhere is refused at submit, before the server reads anything under it.
ENGINE_MODEL_ROOTS = env_list("ENGINE_MODEL_ROOTS", [str(BASE_DIR / "var" / "models")])
DATASETS_DIR = env_str("DATASETS_DIR", str(BASE_DIR / "var" / "datasets"))  # <dir>/<tenant id>/<dataset id>.jsonl
# What one GPU-hour costs a tenant whose own price (Tenant.gpu_hour_price) is empty: the job
# estimate's cost. A price per service, not per device type: a service runs one device type.
GPU_HOUR_PRICE = env_float("GPU_HOUR_PRICE", 2.50)
BILLING_CURRENCY = env_str("BILLING_CURRENCY", "USD")

# -- auth, API ------------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "webapp.api.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "webapp.api.errors.api_exception_handler",
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    # JSON only (dataset uploads add multipart themselves): one parser that refuses what cannot
    # be stored, rather than form parsers that pass NUL characters through to Postgres.
    "DEFAULT_PARSER_CLASSES": ["webapp.api.parsers.StrictJSONParser"],
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    # Proxies in front whose X-Forwarded-For is believed for throttling; none by default, so a
    # client cannot choose the address its limits are counted under.
    "NUM_PROXIES": int(env_float("API_NUM_PROXIES", 0)),
    "DEFAULT_THROTTLE_CLASSES": ["webapp.api.throttling.CallerRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "caller": env_str("API_RATE_PER_CALLER", "1200/min"),
        "job_create": env_str("API_RATE_JOB_CREATE", "240/min"),
    },
}
API_MAX_BODY_BYTES = int(env_float("API_MAX_BODY_BYTES", 1024 * 1024))  # larger: 413 (webapp/api/request_limits.py)
API_BAD_TOKEN_RATE = env_str("API_BAD_TOKEN_RATE", "30/min")  # bad tokens per address, then 429
LOGIN_FAILURE_RATE = env_str("LOGIN_FAILURE_RATE", "10/min")  # failed sign-ins per address and per username
# /metrics (Prometheus): served to a bearer token, or without one to addresses in these
# networks (loopback by default). Plain HTTP, so that a scraper on the internal network is not
# redirected to HTTPS; its Host must still be in ALLOWED_HOSTS.
METRICS_TOKEN = env_str("METRICS_TOKEN", "")
METRICS_ALLOWED_NETWORKS = env_list("METRICS_ALLOWED_NETWORKS", ["127.0.0.0/8", "::1/128"])
for _network in METRICS_ALLOWED_NETWORKS:
    try:
        ipaddress.ip_network(_network, strict=False)
    except ValueError as _bad:
        raise ImproperlyConfigured(f"METRICS_ALLOWED_NETWORKS: {_bad} (give networks such as 10.0.0.0/8)") from None
SECURE_REDIRECT_EXEMPT = [r"^metrics$"]
# Webhooks (webapp/webhooks): endpoints must be HTTPS URLs resolving to public addresses, or
# to addresses in these networks (e.g. a receiver on the internal network; tests: loopback).
WEBHOOK_ALLOWED_NETWORKS = env_list("WEBHOOK_ALLOWED_NETWORKS", [])
for _network in WEBHOOK_ALLOWED_NETWORKS:
    try:
        ipaddress.ip_network(_network, strict=False)
    except ValueError as _bad:
        raise ImproperlyConfigured(f"WEBHOOK_ALLOWED_NETWORKS: {_bad} (give networks such as 10.0.0.0/8)") from None
WEBHOOK_ALLOW_HTTP = env_bool("WEBHOOK_ALLOW_HTTP", False)  # plain http:// endpoints (tests, a trusted network)
WEBHOOK_TIMEOUT_S = env_float("WEBHOOK_TIMEOUT_S", 10.0)  # one attempt: connect, send, answer
WEBHOOK_MAX_ATTEMPTS = int(env_float("WEBHOOK_MAX_ATTEMPTS", 12))  # then the delivery is given up
WEBHOOK_RETRY_BASE_S = env_float("WEBHOOK_RETRY_BASE_S", 2.0)  # backoff: base, 2 x base, 4 x base, ...
WEBHOOK_RETRY_MAX_S = env_float("WEBHOOK_RETRY_MAX_S", 600.0)  # ... up to this wait between attempts
WEBHOOK_MAX_ENDPOINTS = int(env_float("WEBHOOK_MAX_ENDPOINTS", 10))  # per tenant
if WEBHOOK_MAX_ATTEMPTS < 1 or WEBHOOK_TIMEOUT_S <= 0 or WEBHOOK_RETRY_BASE_S <= 0:
    raise ImproperlyConfigured("WEBHOOK_MAX_ATTEMPTS must be >= 1, WEBHOOK_TIMEOUT_S and WEBHOOK_RETRY_BASE_S > 0")
SPECTACULAR_SETTINGS = {
    "TITLE": "JigsawRL API",
    "DESCRIPTION": "Submit and watch RL post-training jobs on a shared cluster.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Two "status" fields with their own choices: each named, so the job's stays StatusEnum.
    "ENUM_NAME_OVERRIDES": {
        "StatusEnum": "webapp.jobs.models.JobStatus",
        "WebhookDeliveryStatusEnum": "webapp.webhooks.models.DeliveryStatus",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "webapp.api.errors.document_error_responses",
    ],
}

# -- static, i18n ---------------------------------------------------------------------------
STATIC_URL = "/static/"
STATIC_ROOT = BASE_DIR / "var" / "static"
FRONTEND_DIST = BASE_DIR / "frontend" / "dist"
STATICFILES_DIRS = [FRONTEND_DIST] if FRONTEND_DIST.exists() else []
WHITENOISE_USE_FINDERS = not PRODUCTION
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# -- security -------------------------------------------------------------------------------
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
if PRODUCTION:
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = int(env_float("SECURE_HSTS_SECONDS", 31_536_000))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True

# json: one object per line with the request and job ids (webapp/observability/logs.py), for a
# log pipeline; plain: for a person at a terminal (the ids in brackets).
LOG_FORMAT = env_str("LOG_FORMAT", "json" if PRODUCTION else "plain")
if LOG_FORMAT not in ("json", "plain"):
    raise ImproperlyConfigured(f"LOG_FORMAT: must be json or plain, got {LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "json": {"()": "webapp.observability.logs.JsonFormatter"},
        "plain": {"()": "webapp.observability.logs.PlainFormatter"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {"jigsaw_engine": {"level": env_str("ENGINE_LOG_LEVEL", "WARNING")}},
}
