import { useMemo } from 'react';
import type { ChartLine } from '../../charts/chartData';
import { chartTestId, metricUnit, type SeriesMap } from '../../charts/series';
import { availableXAxes, jobClocks } from '../../charts/xAxis';
import { MetricBoard } from '../../components/MetricBoard';
import { formatValue } from '../../format';

/** The job page's one line colour (the dashboard's accent). */
const JOB_LINE_COLOR = '#2857c5';

/** The job page's charts: every metric of one job, grouped, with the board's controls. */
export function JobMetricCharts({ jobId, series }: { jobId: string; series: SeriesMap }) {
  const linesByMetric = useMemo(() => {
    const clocks = jobClocks(series);
    const out: Record<string, ChartLine[]> = {};
    for (const [name, points] of Object.entries(series)) {
      if (points.length > 0) out[name] = [{ id: jobId, label: name, color: JOB_LINE_COLOR, points, clocks }];
    }
    return out;
  }, [jobId, series]);
  const xAxes = useMemo(() => availableXAxes(series), [series]);
  return (
    <MetricBoard
      linesByMetric={linesByMetric}
      xAxes={xAxes}
      testIdFor={chartTestId}
      summaryFor={singleSummary}
      syncKey={`job-${jobId}`}
    />
  );
}

function singleSummary(name: string, lines: readonly ChartLine[]): string {
  const points = lines[0]?.points ?? [];
  const last = points[points.length - 1];
  const unit = metricUnit(name);
  return last
    ? `${name}: ${points.length} points, latest ${formatValue(last[1])}${unit ? ` ${unit}` : ''} at step ${last[0]}`
    : `${name}: no data yet`;
}
