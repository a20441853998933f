"""A test-only distribution of rewards, installed as an operator would: a module and its
``*.dist-info`` with ``jigsawrl.rewards`` entry points, in a folder named by ``$JIGSAW_REWARD_PATHS``.

Its rewards fail in every way an installed reward can, so tests can watch each failure reported
per sample and the job go on.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

MODULE = "jigsaw_test_rewards"
SLOW_LIMIT_S = 0.3

_SOURCE = f'''
import os
import time

from jigsaw_engine.envs.reward import Reward


def contains_reference(reply, reference):
    """1 when the reference appears anywhere in the reply."""
    return 1.0 if reference in reply else 0.0


def raises(reply, reference):
    raise ValueError("cannot read this reply")


def _sleep(reply, reference):
    time.sleep(30)
    return 1.0


def garbage(reply, reference):
    return "high"


def not_finite(reply, reference):
    return float("nan")


def exits(reply, reference):
    os._exit(3)


def _moody(reply, reference):
    """By the reference's remainder mod 4: raise, hang, return garbage, or score."""
    kind = int(reference) % 4
    if kind == 0:
        raise ValueError("cannot read this reply")
    if kind == 1:
        time.sleep(30)
    if kind == 2:
        return "high"
    return contains_reference(reply, reference)


slow = Reward(_sleep, description="sleeps past its limit", suits="nothing", time_limit_s={SLOW_LIMIT_S})
moody = Reward(
    _moody, description="fails three ways in four", suits="generated arithmetic", time_limit_s={SLOW_LIMIT_S}
)
not_a_reward = 42
'''

_ENTRY_POINTS = f"""[jigsawrl.rewards]
contains_reference = {MODULE}:contains_reference
raises = {MODULE}:raises
slow = {MODULE}:slow
garbage = {MODULE}:garbage
not_finite = {MODULE}:not_finite
exits = {MODULE}:exits
moody = {MODULE}:moody
not_a_reward = {MODULE}:not_a_reward
missing = {MODULE}:no_such_name
"""

INSTALLED = ["contains_reference", "exits", "garbage", "moody", "not_finite", "raises", "slow"]
"""What the registry lists of this distribution (``not_a_reward`` and ``missing`` do not load)."""


def install_test_rewards(folder: Path) -> Path:
    """Write the distribution into ``folder``; return it (the value for ``$JIGSAW_REWARD_PATHS``)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{MODULE}.py").write_text(_SOURCE)
    dist = folder / f"{MODULE}-0.1.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {MODULE}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(_ENTRY_POINTS)
    return folder


@pytest.fixture()
def operator_rewards(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The test rewards installed for this test (and the children it starts); afterwards their
    processes are ended and the folder leaves ``sys.path``, so later tests do not see them."""
    from jigsaw_engine.envs.reward_registry import REWARD_PATHS_ENV
    from jigsaw_engine.envs.reward_sandbox import close_sandboxes

    folder = install_test_rewards(tmp_path / "rewards")
    monkeypatch.setenv(REWARD_PATHS_ENV, str(folder))
    yield folder
    close_sandboxes()
    if str(folder) in sys.path:
        sys.path.remove(str(folder))
    sys.modules.pop(MODULE, None)
