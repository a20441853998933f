import { describe, expect, it } from 'vitest';
import { CARD_FRAME, chartGeometry, WIDE_FRAME } from './frame';

describe('chartGeometry', () => {
  it('is null without a single point', () => {
    expect(chartGeometry([], CARD_FRAME)).toBeNull();
    expect(chartGeometry([[], []], WIDE_FRAME)).toBeNull();
  });

  it('maps one series onto the plot: first step at the left edge, last at the right', () => {
    const g = chartGeometry([[[1, 0], [3, 10]]], CARD_FRAME)!;
    expect(g.xMin).toBe(1);
    expect(g.xMax).toBe(3);
    expect(g.sx(1)).toBe(52);
    expect(g.sx(3)).toBe(400 - 12);
    expect(g.ticks[0]).toBeLessThanOrEqual(0);
    expect(g.ticks[g.ticks.length - 1]).toBeGreaterThanOrEqual(10);
    expect(g.paths).toEqual([`M52.0,${g.sy(0).toFixed(1)}L388.0,${g.sy(10).toFixed(1)}`]);
  });

  it('puts several series on shared axes, keeping an empty one empty', () => {
    const g = chartGeometry(
      [
        [[0, 1], [10, 2]],
        [],
        [[5, -4], [20, 8]],
      ],
      WIDE_FRAME,
    )!;
    expect([g.xMin, g.xMax]).toEqual([0, 20]);
    expect(g.ticks[0]).toBeLessThanOrEqual(-4);
    expect(g.ticks[g.ticks.length - 1]).toBeGreaterThanOrEqual(8);
    expect(g.paths[1]).toBe('');
    expect(g.paths[2]!.startsWith(`M${g.sx(5).toFixed(1)},`)).toBe(true);
    expect(g.sx(20)).toBe(800 - 16);
  });

  it('centres a lone point', () => {
    const g = chartGeometry([[[7, 3]]], CARD_FRAME)!;
    expect(g.sx(7)).toBe(52 + (400 - 52 - 12) / 2);
    expect(g.sy(3)).toBeGreaterThan(10);
    expect(g.sy(3)).toBeLessThan(180 - 24);
  });
});
