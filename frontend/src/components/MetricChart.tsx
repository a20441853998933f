import { memo, useEffect, useId, useMemo, useRef, useState, type KeyboardEvent } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { buildColumns, logDistr, nearestValue, pointCount, zoomRange, type ChartLine } from '../charts/chartData';
import { metricUnit } from '../charts/series';
import { formatX, X_AXIS_LABELS, type XAxisMode } from '../charts/xAxis';
import { formatValue } from '../format';

export interface ChartView {
  xMode: XAxisMode;
  /** EMA weight, 0 (off) to MAX_SMOOTHING. */
  smoothing: number;
  logScale: boolean;
  /** Charts with the same key share one cursor (uPlot's cursor sync). */
  syncKey: string;
}

interface MetricChartProps {
  /** The metric: the caption and its unit. */
  name: string;
  lines: readonly ChartLine[];
  view: ChartView;
  testId: string;
  /** Accessible summary of what the chart shows. */
  summary: string;
  height?: number;
  className?: string;
  emptyText?: string;
}

/** Faint enough to read the smoothed line over it, strong enough to see the spread. */
const RAW_ALPHA_SMOOTHED = 0.25;
const KEY_STEP = 1;
const KEY_STEP_FAST = 10;

function cssVar(name: string, fallback: string): string {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || fallback;
}

/**
 * One metric as a uPlot canvas chart: drag to zoom, double-click to reset, a cursor shared
 * with every chart of the same sync key, raw and EMA-smoothed lines, a log scale, and the
 * keyboard (arrows move the cursor, + and - zoom, 0 resets). The uPlot instance is made
 * when the chart first scrolls into view, so a page of sixty charts opens with the few
 * on screen.
 */
export const MetricChart = memo(function MetricChart({
  name,
  lines,
  view,
  testId,
  summary,
  height = 170,
  className,
  emptyText,
}: MetricChartProps) {
  const { xMode, smoothing, logScale, syncKey } = view;
  const hasData = lines.some((l) => l.points.length > 0);
  const figureRef = useRef<HTMLElement>(null);
  const [visible, setVisible] = useState(false);
  // Built only once the chart is near the viewport: live points re-render every chart.
  const columns = useMemo(
    () => (visible ? buildColumns(lines, xMode, smoothing) : null),
    [visible, lines, xMode, smoothing],
  );
  const plotRef = useRef<HTMLDivElement>(null);
  const readoutRef = useRef<HTMLSpanElement>(null);
  const announceRef = useRef<HTMLSpanElement>(null);
  const uplotRef = useRef<uPlot | null>(null);
  const zoomedRef = useRef(false);
  const keyIdxRef = useRef<number | null>(null);
  const hintId = useId();
  const unit = metricUnit(name);

  // What the read-out says at an x index (the cursor's), or the latest values without one.
  const describe = (u: uPlot, idx: number | null): string => {
    const data = u.data as ChartColumnsData;
    const xs = data[0] ?? [];
    if (xs.length === 0) return '—';
    const at = idx ?? xs.length - 1;
    const values = lines.map((line, i) => {
      // A line React has just added may not be in uPlot's data yet (a synced cursor can move
      // before the new columns are set): it reads as no value until they are.
      const column = data[2 + 2 * i];
      const v = column ? nearestValue(column, at) : null;
      return lines.length === 1 ? fmt(v) : `${line.label} ${fmt(v)}`;
    });
    const where = `${xMode === 'step' ? 'step ' : ''}${formatX(xs[at]!, xMode)}`;
    return idx === null && lines.length === 1 ? values[0]! : `${where}: ${values.join(', ')}`;
  };
  const describeRef = useRef(describe);
  describeRef.current = describe;

  // Made once visible; remade when what the options depend on changes.
  const colorsKey = lines.map((l) => `${l.id}=${l.color}`).join('|');
  const distr = logScale && columns ? logDistr(columns.slice(1)) : 1;
  const smoothed = smoothing > 0;
  useEffect(() => {
    const figure = figureRef.current;
    if (!figure || visible) return;
    if (typeof IntersectionObserver === 'undefined') {
      setVisible(true);
      return;
    }
    const io = new IntersectionObserver(
      (entries) => {
        if (entries.some((e) => e.isIntersecting)) setVisible(true);
      },
      { rootMargin: '300px 0px' },
    );
    io.observe(figure);
    return () => io.disconnect();
  }, [visible]);

  useEffect(() => {
    const target = plotRef.current;
    if (!columns || !target || !hasData) return;
    const muted = cssVar('--muted', '#5d6675');
    const grid = '#edf0f4';
    const series: uPlot.Series[] = [{ label: X_AXIS_LABELS[xMode] }];
    for (const line of lines) {
      series.push(
        { label: `${line.label} (raw)`, stroke: line.color, width: 1.5, alpha: smoothed ? RAW_ALPHA_SMOOTHED : 1, spanGaps: true },
        { label: line.label, stroke: line.color, width: 2, show: smoothed, spanGaps: true },
      );
    }
    const opts: uPlot.Options = {
      width: Math.max(120, target.clientWidth),
      height,
      series,
      legend: { show: false },
      padding: [8, 8, 0, 0],
      scales: {
        x: { time: false },
        y: distr === 1 ? {} : { distr, log: 10, asinh: 1 },
      },
      axes: [
        {
          stroke: muted,
          grid: { stroke: grid, width: 1 },
          ticks: { stroke: grid, width: 1 },
          size: 30,
          font: '10px system-ui, sans-serif',
          values: (_u, splits) => splits.map((v) => formatX(v, xMode)),
        },
        {
          stroke: muted,
          grid: { stroke: grid, width: 1 },
          ticks: { stroke: grid, width: 1 },
          size: 54,
          font: '10px system-ui, sans-serif',
          values: (_u, splits) => splits.map((v) => (v === null ? '' : formatValue(v))),
        },
      ],
      cursor: {
        sync: { key: syncKey },
        drag: { x: true, y: false, setScale: true },
        points: { size: 6 },
      },
      hooks: {
        setCursor: [
          (u) => {
            if (readoutRef.current) readoutRef.current.textContent = describeRef.current(u, u.cursor.idx ?? null);
          },
        ],
        setSelect: [
          (u) => {
            if (u.select.width > 0) zoomedRef.current = true;
          },
        ],
      },
    };
    const u = new uPlot(opts, columns as uPlot.AlignedData, target);
    uplotRef.current = u;
    zoomedRef.current = false;
    // uPlot's own double-click resets the zoom; from then on live points rescale it again.
    const onDblClick = () => {
      zoomedRef.current = false;
    };
    u.over.addEventListener('dblclick', onDblClick);
    const ro = new ResizeObserver(() => {
      const width = Math.max(120, target.clientWidth);
      if (width !== u.width) u.setSize({ width, height });
    });
    ro.observe(target);
    if (readoutRef.current) readoutRef.current.textContent = describeRef.current(u, null);
    figureRef.current?.setAttribute('data-drawn', 'true');
    return () => {
      ro.disconnect();
      u.over.removeEventListener('dblclick', onDblClick);
      u.destroy();
      uplotRef.current = null;
      figureRef.current?.removeAttribute('data-drawn');
    };
    // Columns and lines are fed by the effect below: the chart is remade only when its options change.
  }, [visible, hasData, xMode, distr, smoothed, colorsKey, syncKey, height]);

  // New points (live ones, a changed axis or smoothing): redrawn in place, a zoom kept.
  useEffect(() => {
    const u = uplotRef.current;
    if (u && columns && u.data !== (columns as uPlot.AlignedData)) u.setData(columns as uPlot.AlignedData, !zoomedRef.current);
    // The read-out is written here and by uPlot's cursor hook, never rendered by React.
    if (readoutRef.current && (!u || u.cursor.idx == null)) {
      readoutRef.current.textContent = u ? describeRef.current(u, null) : latestText(lines);
    }
  }, [columns, lines]);

  const onKeyDown = (event: KeyboardEvent<HTMLDivElement>) => {
    const u = uplotRef.current;
    if (!u) return;
    const xs = u.data[0];
    if (xs.length === 0) return;
    const min = u.scales.x?.min ?? xs[0]!;
    const max = u.scales.x?.max ?? xs[xs.length - 1]!;
    const inView = (i: number) => xs[i]! >= min && xs[i]! <= max;
    const first = xs.findIndex((_, i) => inView(i));
    const last = xs.length - 1 - [...xs].reverse().findIndex((_, j) => inView(xs.length - 1 - j));
    const moveTo = (idx: number) => {
      keyIdxRef.current = idx;
      const yCol = u.data[2]!;
      const y = nearestValue(yCol as (number | null)[], idx);
      u.setCursor({ left: u.valToPos(xs[idx]!, 'x'), top: y === null ? u.over.clientHeight / 2 : u.valToPos(y, 'y') });
      if (announceRef.current) announceRef.current.textContent = `${name}, ${describeRef.current(u, idx)}`;
    };
    const current = keyIdxRef.current !== null && inView(keyIdxRef.current) ? keyIdxRef.current : null;
    const step = event.shiftKey ? KEY_STEP_FAST : KEY_STEP;
    const zoom = (factor: number) => {
      const centre = current !== null ? xs[current]! : (min + max) / 2;
      const range = zoomRange({ min, max }, centre, factor, xs[0]!, xs[xs.length - 1]!);
      if (range) {
        zoomedRef.current = true;
        u.setScale('x', range);
      } else {
        zoomedRef.current = false;
        u.setData(u.data, true);
      }
      if (announceRef.current) {
        announceRef.current.textContent = range
          ? `${name}, zoomed to ${formatX(range.min, xMode)} – ${formatX(range.max, xMode)}`
          : `${name}, zoom reset`;
      }
    };
    switch (event.key) {
      case 'ArrowRight':
        moveTo(current === null ? first : Math.min(last, current + step));
        break;
      case 'ArrowLeft':
        moveTo(current === null ? last : Math.max(first, current - step));
        break;
      case 'Home':
        moveTo(first);
        break;
      case 'End':
        moveTo(last);
        break;
      case '+':
      case '=':
        zoom(0.5);
        break;
      case '-':
        zoom(2);
        break;
      case '0':
      case 'Escape':
        zoom(Infinity);
        break;
      default:
        return;
    }
    event.preventDefault();
  };

  const points = pointCount(lines);
  return (
    <figure
      ref={figureRef}
      className={className ? `chart ${className}` : 'chart'}
      data-testid={testId}
      data-points={points}
      data-lines={lines.filter((l) => l.points.length > 0).length}
    >
      <figcaption className="chart-head">
        <span className="chart-name">
          {name}
          {unit && <span className="chart-unit"> ({unit})</span>}
        </span>
        <span className="chart-value" ref={readoutRef} data-testid="chart-readout" />
      </figcaption>
      {hasData ? (
        <div
          className="chart-plot"
          ref={plotRef}
          style={{ minHeight: height }}
          tabIndex={0}
          role="group"
          aria-roledescription="chart"
          aria-label={summary}
          aria-describedby={hintId}
          onKeyDown={onKeyDown}
          onBlur={() => {
            keyIdxRef.current = null;
          }}
        />
      ) : (
        <p className="muted chart-empty">{emptyText ?? 'No data yet.'}</p>
      )}
      <span id={hintId} className="visually-hidden">
        Arrow keys move the cursor, Home and End jump to the ends, plus and minus zoom, 0 resets the zoom.
      </span>
      <span ref={announceRef} className="visually-hidden" aria-live="polite" />
    </figure>
  );
});

type ChartColumnsData = readonly (readonly (number | null)[])[];

function fmt(v: number | null): string {
  return v === null ? '—' : formatValue(v);
}

/** The read-out before the cursor moves: a single line's latest value. */
function latestText(lines: readonly ChartLine[]): string {
  if (lines.length !== 1) return '';
  const last = lines[0]!.points[lines[0]!.points.length - 1];
  return last ? formatValue(last[1]) : '—';
}
