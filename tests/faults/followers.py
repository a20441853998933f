"""A dashboard's view of a job during a fault: a WebSocket client that follows the job's
events, and after any disconnect reconnects with the last sequence number it saw."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

TERMINAL = {"succeeded", "failed", "cancelled"}


class EventFollower(threading.Thread):
    def __init__(self, base: str, token: str, job_id: str) -> None:
        super().__init__(name=f"follow-{job_id}", daemon=True)
        self.url = base.replace("http://", "ws://") + f"/ws/v1/jobs/{job_id}"
        self.token = token
        self.seqs: list[int] = []
        self.statuses: list[str] = []
        self.reconnects = 0
        self.done = threading.Event()
        self._halt = threading.Event()

    def run(self) -> None:
        from websockets.sync.client import connect

        while not self._halt.is_set() and not self.done.is_set():
            after = self.seqs[-1] if self.seqs else 0
            try:
                with connect(
                    f"{self.url}?after={after}",
                    additional_headers={"Authorization": f"Bearer {self.token}"},
                    open_timeout=5,
                ) as socket:
                    while not self._halt.is_set():
                        try:
                            frame = json.loads(socket.recv(timeout=0.5))
                        except TimeoutError:
                            continue
                        self._take(frame)
                        if self.done.is_set():
                            return
            except Exception:  # any disconnect or refusal: the dashboard just tries again
                pass
            self.reconnects += 1
            time.sleep(0.5)

    def _take(self, frame: dict[str, Any]) -> None:
        for event in frame.get("events", []):
            self.seqs.append(int(event["seq"]))
            if event["kind"] == "status":
                status = str(event["data"].get("status", ""))
                self.statuses.append(status)
                if status in TERMINAL:
                    self.done.set()

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)

    def gapless(self) -> bool:
        """Every event once, in order, from the first: what the user saw is the whole story."""
        return self.seqs == list(range(1, len(self.seqs) + 1))
