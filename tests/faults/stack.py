"""The whole control plane and engine as separate processes, as in production: uvicorn,
a Celery worker, beat and a Ray head hosting the engine's actor, on private Postgres and Redis.
Any one of them can be killed and started again."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
import time
import urllib.error
from pathlib import Path
from typing import Any

from devstack.launcher import (
    MIB,
    LocalStack,
    RayHead,
    api_json,
    ensure_database,
    free_port,
    ray_env,
    real_engine_env,
)
from tests.faults.private_services import PrivatePostgres, PrivateRedis
from tests.processes import ray_actor_processes

DATABASE = "jigsaw_faults"


class FaultStack(LocalStack):
    def __init__(self, *, engine_speed: float, log_dir: Path, real: bool = False, engine_failpoints: str = "") -> None:
        """``real``: the engine trains tiny models for real on this machine's cores (two
        "devices"), checkpointing every step; ``engine_failpoints``: the engine's failpoints."""
        # Short: Ray's socket paths must stay under the kernel's length limit.
        self.tmp = Path(tempfile.mkdtemp(prefix="jf-", dir="/tmp"))
        self.tmp.chmod(0o755)  # the postgres user must reach its folder inside
        self.postgres = PrivatePostgres(self.tmp)
        self.redis = PrivateRedis(self.tmp)
        ray = RayHead(free_port(), 2, self.tmp / "ray", 128 * MIB)
        self.tokens: dict[str, str] = {}
        env = dict(os.environ)
        env.update(
            JIGSAW_ENV="development",
            DATABASE_URL=self.postgres.url(DATABASE),
            REDIS_URL=self.redis.url(0),
            ENGINE_SPEED=str(engine_speed),
            DB_POOL_MIN="1",
            # A lost dispatch or a restarted engine is noticed within seconds, not half a minute.
            RECONCILE_EVERY_S="2",
            RECONCILE_DISPATCH_GRACE_S="6",
            API_RATE_PER_CALLER="100000/min",
            PYTHONUNBUFFERED="1",
            **ray_env(ray.port),
        )
        env.pop("JIGSAW_STANDALONE", None)
        env.pop("JIGSAW_FAILPOINTS", None)
        if real:
            env.update(real_engine_env(2), ENGINE_REAL_CHECKPOINT_DIR=str(self.tmp / "checkpoints"))
        super().__init__(
            env,
            log_dir,
            web_port=free_port(),
            ray=ray,
            beat_schedule=self.tmp / "beat-schedule",
            worker_args=("--without-mingle", "--without-gossip"),
            append_logs=True,
        )
        self.engine_failpoints = engine_failpoints

    @property
    def supervisor_restarts(self) -> list[str]:
        """Processes that exited on their own and were started again, as compose would (a
        Celery worker can die on a broker connection lost mid-restore, say)."""
        return self.processes.restarts

    # -- start and stop ----------------------------------------------------------------------
    def start(self) -> None:
        self.postgres.start()
        ensure_database(self.postgres.url(DATABASE))
        self.redis.start()
        self.manage("migrate", "--noinput")
        self.tokens = json.loads(self.manage("seed_demo", "--json"))["tokens"]
        super().start({"JIGSAW_FAILPOINTS": self.engine_failpoints} if self.engine_failpoints else None)
        self.processes.supervise()

    def start_process(self, name: str, extra_env: dict[str, str] | None = None) -> None:
        self.processes.start(name, extra_env=extra_env)

    def ray_actor_processes(self, actor: str) -> set[int]:
        """This stack's ``ray::<actor>`` processes (below its Ray head), and no other Ray's."""
        return ray_actor_processes(actor, root=self.processes.procs["ray-head"].pid)

    def kill_process(self, name: str) -> None:
        self.processes.kill(name)

    def stop(self, timeout_s: float = 20) -> None:
        super().stop(timeout_s)
        self.redis.kill()
        with contextlib.suppress(subprocess.CalledProcessError):
            self.postgres.stop("immediate")

    # -- the REST API, as a user reaches it --------------------------------------------------
    def api(self, method: str, path: str, tenant: str, body: dict[str, Any] | None = None) -> Any:
        return api_json(self.base, method, path, self.tokens[tenant], body)

    def api_retrying(self, method: str, path: str, tenant: str, timeout_s: float = 60) -> Any:
        """GET through an outage: what a dashboard's polling does."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return self.api(method, path, tenant)
            except (urllib.error.HTTPError, OSError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
