import { memo, useEffect, useId, useMemo, useRef, useState, type KeyboardEvent } from 'react';
import type { ClusterTimeline } from '../../api/types';
import {
  formatPercent,
  formatSeconds,
  jobColor,
  kindInfo,
  layoutRows,
  moveFocus,
  OTHER_TENANT_LABEL,
  timeTicks,
  viewStart,
  type KindGroup,
  type PlacedSpan,
} from './timeline';

const W = 1000;
const ROW_H = 30;
const PAD = { left: 64, right: 12, top: 8, bottom: 26 };
const PLOT_W = W - PAD.left - PAD.right;

/** The fill pattern drawn over a span's job colour, one per kind group (rollout: solid). */
export function PatternDefs({ prefix }: { prefix: string }) {
  return (
    <defs>
      <pattern id={`${prefix}-logprob`} width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">
        <rect width="2.5" height="6" fill="rgba(255,255,255,0.55)" />
      </pattern>
      <pattern id={`${prefix}-train`} width="6" height="6" patternUnits="userSpaceOnUse">
        <circle cx="3" cy="3" r="1.3" fill="rgba(255,255,255,0.7)" />
      </pattern>
      <pattern id={`${prefix}-sync`} width="6" height="5" patternUnits="userSpaceOnUse">
        <rect width="6" height="2" fill="rgba(255,255,255,0.6)" />
      </pattern>
      <pattern id={`${prefix}-other`} width="6" height="6" patternUnits="userSpaceOnUse">
        <path d="M0,0 L6,6 M6,0 L0,6" stroke="rgba(255,255,255,0.6)" strokeWidth="1" />
      </pattern>
    </defs>
  );
}

export function patternFill(prefix: string, group: KindGroup): string | null {
  return group === 'rollout' ? null : `url(#${prefix}-${group})`;
}

export function describeSpan(p: PlacedSpan): string {
  const s = p.span;
  const info = kindInfo(s.kind);
  const name = s.job === null ? OTHER_TENANT_LABEL : s.job_name;
  const duration = formatSeconds((s.running ? p.end : s.end_s) - s.start_s);
  return [
    name,
    `${info.label}${s.bucket ? ` (${s.bucket})` : ''}`,
    `step ${s.step}`,
    `device${s.devices.length === 1 ? '' : 's'} ${s.devices.join(', ')}`,
    `${duration}${s.running ? ' so far, running' : ''}`,
    `share ${formatPercent(s.share)}`,
  ].join(' · ');
}

interface TimelineChartProps {
  timeline: ClusterTimeline;
}

/** One row per device over the window; each span on each of its devices, stacked by share. */
export const TimelineChart = memo(function TimelineChart({ timeline }: TimelineChartProps) {
  const prefix = `cl${useId().replace(/[^a-zA-Z0-9_-]/g, '')}`;
  const { now_s: now, num_devices: numDevices, device_type: deviceType } = timeline;
  const since = viewStart(timeline.since_s, timeline.spans);
  const rows = useMemo(() => layoutRows(timeline.spans, numDevices, since, now), [timeline, numDevices, since, now]);
  const [active, setActive] = useState<string | null>(null);
  const [hover, setHover] = useState<string | null>(null);
  const [focused, setFocused] = useState<string | null>(null);
  const svgRef = useRef<SVGSVGElement>(null);
  const wantFocus = useRef(false);

  const flat = useMemo(() => rows.flat(), [rows]);
  const activeKey = active && flat.some((p) => p.key === active) ? active : (flat[0]?.key ?? null);
  const shownKey = hover ?? focused;
  const shown = shownKey ? flat.find((p) => p.key === shownKey) : undefined;

  useEffect(() => {
    if (!wantFocus.current || !activeKey) return;
    wantFocus.current = false;
    const el = svgRef.current?.querySelector<SVGElement>(`[data-key="${CSS.escape(activeKey)}"]`);
    el?.focus();
  }, [activeKey]);

  const height = PAD.top + Math.max(1, numDevices) * ROW_H + PAD.bottom;
  const span = Math.max(1e-9, now - since);
  const sx = (t: number) => PAD.left + ((t - since) / span) * PLOT_W;
  const ticks = timeTicks(now - since);

  const onKeyDown = (event: KeyboardEvent<SVGSVGElement>) => {
    if (!['ArrowLeft', 'ArrowRight', 'ArrowUp', 'ArrowDown', 'Home', 'End'].includes(event.key)) return;
    event.preventDefault();
    wantFocus.current = true;
    setActive(moveFocus(rows, activeKey, event.key));
  };

  const busyRows = rows.filter((r) => r.length > 0).length;
  return (
    <figure className="cluster-timeline" data-testid="cluster-timeline">
      <p className="cluster-details" data-testid="cluster-span-details" aria-live="polite">
        {shown ? describeSpan(shown) : 'Hover over a span, or Tab to the chart and use the arrow keys, for its details.'}
      </p>
      <svg
        ref={svgRef}
        viewBox={`0 0 ${W} ${height}`}
        role="group"
        aria-label={`Sub-stages on ${numDevices} ${deviceType} devices over the last ${formatSeconds(now - timeline.since_s)} of engine time; ${busyRows} devices busy. Arrow keys move between spans.`}
        onKeyDown={onKeyDown}
        onPointerLeave={() => setHover(null)}
      >
        <PatternDefs prefix={prefix} />
        {ticks.map((ago) => (
          <g key={ago} className="cluster-grid">
            <line x1={sx(now - ago)} x2={sx(now - ago)} y1={PAD.top} y2={height - PAD.bottom} />
            <text x={sx(now - ago)} y={height - 8} textAnchor={ago === 0 ? 'end' : 'middle'}>
              {ago === 0 ? 'now' : `−${formatSeconds(ago)}`}
            </text>
          </g>
        ))}
        {rows.map((row, device) => {
          const y = PAD.top + device * ROW_H;
          return (
            <g key={device} data-testid="cluster-device-row" data-device={device} data-spans={row.length}>
              <rect className="cluster-row-bg" x={PAD.left} y={y + 1} width={PLOT_W} height={ROW_H - 2} />
              <text className="cluster-row-label" x={PAD.left - 8} y={y + ROW_H / 2} dy="0.32em" textAnchor="end">
                {deviceType.toUpperCase()} {device}
              </text>
              {row.map((p) => {
                const info = kindInfo(p.span.kind);
                const x = sx(p.start);
                const w = Math.max(1.5, sx(p.end) - x);
                const inner = ROW_H - 4;
                const h = Math.max(2, p.height * inner);
                const top = y + 2 + (1 - p.offset - p.height) * inner;
                const fillPattern = patternFill(prefix, info.group);
                const label = describeSpan(p);
                return (
                  <g
                    key={p.key}
                    data-key={p.key}
                    data-testid="cluster-span"
                    data-job={p.span.job ?? ''}
                    data-kind={p.span.kind}
                    data-running={p.span.running ? 'true' : 'false'}
                    className={`cluster-span${p.span.running ? ' cluster-span-running' : ''}`}
                    tabIndex={p.key === activeKey ? 0 : -1}
                    role="img"
                    aria-label={label}
                    onPointerEnter={() => setHover(p.key)}
                    onFocus={() => {
                      setActive(p.key);
                      setFocused(p.key);
                    }}
                    onBlur={() => setFocused((k) => (k === p.key ? null : k))}
                  >
                    <title>{label}</title>
                    <rect x={x} y={top} width={w} height={h} fill={jobColor(p.span.job)} />
                    {fillPattern && <rect x={x} y={top} width={w} height={h} fill={fillPattern} />}
                    {w >= 12 && h >= 11 && (
                      <text className="cluster-span-letter" x={x + w / 2} y={top + h / 2} dy="0.35em" textAnchor="middle">
                        {info.letter}
                      </text>
                    )}
                  </g>
                );
              })}
            </g>
          );
        })}
      </svg>
    </figure>
  );
});
