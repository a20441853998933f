"""``scripts/width_profile.py``: a long-tailed synchronous pipeline's rollout does not get
shorter with more workers the way its training does, which is where M1's gap to its lower
bound goes (decode run wide, not idle devices)."""

from __future__ import annotations

from dataclasses import replace

from jigsaw_engine.spec.mixes import build_mix
from jigsaw_engine.spec.pipeline import parse_pipeline_spec
from tests.scripts import load_script


def test_m1_rollouts_cost_more_device_seconds_wide_while_training_costs_about_the_same() -> None:
    script = load_script("width_profile")
    workload = build_mix("M1")
    spec = replace(parse_pipeline_spec(workload.pipelines[0]), total_steps=3)
    rows = [script.profile_width(workload.cluster, spec, w) for w in (1, 2, 8)]
    one, two, eight = rows
    # More devices, shorter steps: the script measured the widths it was asked for.
    assert one.step_s > two.step_s > eight.step_s
    # Training is data parallel: 8x the devices, about 1/8 of the time (collectives aside).
    assert eight.training_device_s < 1.5 * one.training_device_s
    assert eight.training_s < one.training_s / 4
    # The rollout lasts as long as its longest sequence: 8x the devices buy well under 2x.
    assert eight.rollout_s > one.rollout_s / 2
    assert eight.rollout_device_s > 4 * one.rollout_device_s
    narrow, train, per_step = script.packed_device_s(rows)
    assert narrow.width == 1
    assert per_step == narrow.rollout_device_s + train.training_device_s
    # Packed with no gap, four such pipelines beat verl's partitions of two devices each.
    assert per_step * 4 / workload.cluster.num_devices < two.step_s
