"""``jigsaw_engine.bench.width_profile`` (``scripts/width_profile.py`` prints it): a long-tailed
synchronous pipeline's rollout does not get shorter with more workers the way its training does,
which is where M1's gap to its lower bound goes (decode run wide, not idle devices)."""

from __future__ import annotations

from dataclasses import replace

from jigsaw_engine.bench import width_profile
from jigsaw_engine.bench.mixes import build_mix
from jigsaw_engine.spec.pipeline import parse_pipeline_spec


def test_m1_rollouts_cost_more_device_seconds_wide_while_training_costs_about_the_same() -> None:
    workload = build_mix("M1")
    spec = replace(parse_pipeline_spec(workload.pipelines[0]), total_steps=3)
    rows = [width_profile.profile_width(workload.cluster, spec, w) for w in (1, 2, 4, 8)]
    one, two, _, eight = rows
    # More devices, shorter steps: the script measured the widths it was asked for.
    assert one.step_s > two.step_s > eight.step_s
    # Training is data parallel: 8x the devices, about 1/8 of the time (collectives aside).
    assert eight.training_device_s < 1.5 * one.training_device_s
    assert eight.training_s < one.training_s / 4
    # The rollout lasts as long as its longest sequence: 8x the devices buy well under 2x.
    assert eight.rollout_s > one.rollout_s / 2
    assert eight.rollout_device_s > 4 * one.rollout_device_s
    step_s, (layout,) = width_profile.packed_step_s([(rows, 4)], workload.cluster.num_devices)
    # Four such pipelines packed: rollouts narrower than training, a step sooner than verl's
    # partitions of two devices each, and no sooner than one pipeline's own chain allows.
    assert layout.rollout.width < layout.training.width
    assert layout.chain_s <= step_s < two.step_s
    assert step_s >= 4 * layout.device_s / workload.cluster.num_devices - 1e-9


def test_packing_takes_the_period_that_fits_both_the_chain_and_the_work() -> None:
    row = width_profile.WidthRow
    # Worked by hand, 4 devices, two pipelines of one kind:
    # width 1: rollout 10 s, training 20 s; width 2: rollout 8 s (16 dev-s), training 10 s (20 dev-s).
    rows = [row(1, 30.0, 10.0, 20.0, 10.0, 20.0), row(2, 18.0, 8.0, 10.0, 16.0, 20.0)]
    # Layouts (rollout w, training w): (1,1) chain 30, 30 dev-s; (1,2) chain 20, 30 dev-s;
    # (2,1) chain 28, 36 dev-s; (2,2) chain 18, 36 dev-s. Work for two: 60 or 72 dev-s over 4
    # devices = 15 or 18 s. At P=18 only (2,2) fits: max(18, 18) = 18. At P=20 (1,2) fits with
    # 30 dev-s: max(20, 15) = 20. The best is 18 s with (2,2).
    step_s, (layout,) = width_profile.packed_step_s([(rows, 2)], 4)
    assert step_s == 18.0
    assert (layout.rollout.width, layout.training.width) == (2, 2)
    # On 8 devices the work fits sooner than the chain: (2,2) again, the chain sets 18 s; on 2
    # devices the work sets it: (1,2) at 30 dev-s x 2 / 2 = 30 s beats (2,2) at 36 s.
    assert width_profile.packed_step_s([(rows, 2)], 8)[0] == 18.0
    step_s, (layout,) = width_profile.packed_step_s([(rows, 2)], 2)
    assert step_s == 30.0
    assert (layout.rollout.width, layout.training.width) in {(1, 2), (1, 1)}


def test_taking_turns_keeps_sub_stages_whole_and_so_steps_no_sooner_than_the_fluid_packing() -> None:
    row = width_profile.WidthRow
    # Worked by hand, 4 devices, two pipelines of one kind (rollout s, training s per width):
    # 1: 10, 12; 2: 9, 6; 3: 8.5, 4; 4: 8, 3 (device-seconds: the wall time x the width).
    rows = {
        w: row(w, r + t, r, t, r * w, t * w)
        for w, r, t in ((1, 10.0, 12.0), (2, 9.0, 6.0), (3, 8.5, 4.0), (4, 8.0, 3.0))
    }
    # Taking turns, one at a time (s = 1) needs w + r <= 4: (r 1, w 3) steps every
    # max(10 + 4, 2 x 4) = 14 s; (r 2, w 2) every max(9 + 6, 2 x 6) = 15 s. Both at once
    # (s = 2) needs 2w <= 4 and 2r <= 4: (2, 2) every max(15, 6) = 15 s. Best: 14 s.
    ring = width_profile.round_robin_step_s(rows, 2, 4)
    assert (ring.rollout.width, ring.training.width, ring.at_once, ring.step_s) == (1, 3, 1, 14.0)
    # The fluid packing may train on all 4 while the other rolls out on 1 (5 devices at once):
    # chain 10 + 3 = 13 s, 2 x (10 + 12) device-s / 4 = 11 s, so 13 s, sooner than any turn-taking.
    fluid_s, _ = width_profile.packed_step_s([(list(rows.values()), 2)], 4)
    assert fluid_s == 13.0 < ring.step_s
    # Three pipelines on the same 4 devices fit only narrow: one trains on 2 while two roll out on 1.
    ring = width_profile.round_robin_step_s(rows, 3, 4)
    assert (ring.rollout.width, ring.training.width, ring.at_once) == (1, 2, 1)
    assert ring.step_s == max(10.0 + 6.0, 3 * 6.0)
