import { markerPercent, meterLevel, meterPercent } from './display';

interface UsageBarProps {
  /** What is measured, for screen readers: "GPUs held by Acme". */
  label: string;
  value: number;
  max: number;
  /** The visible figure, e.g. "6 / 8". */
  text: string;
  /** A second, quieter line under the bar. */
  detail?: string;
  /** A tick inside the bar (the guarantee on a GPU bar). */
  marker?: { at: number; label: string };
  testId?: string;
}

/** Usage against a limit as a bar; its colour says how close to the limit it is. */
export function UsageBar({ label, value, max, text, detail, marker, testId }: UsageBarProps) {
  const level = meterLevel(value, max);
  const tick = marker ? markerPercent(marker.at, max) : null;
  return (
    <div
      className={`meter meter-${level}`}
      data-testid={testId}
      data-level={level}
      role="meter"
      aria-label={label}
      aria-valuemin={0}
      aria-valuemax={Math.max(max, 0)}
      aria-valuenow={Math.max(0, Math.min(value, max))}
      aria-valuetext={`${text}${level === 'over' ? ', over the limit' : ''}${detail ? `; ${detail}` : ''}`}
    >
      <div className="meter-row">
        <div className="meter-track">
          <div className="meter-fill" style={{ width: `${meterPercent(value, max)}%` }} />
          {tick !== null && marker && (
            <div className="meter-marker" style={{ left: `${tick}%` }} title={marker.label} />
          )}
        </div>
        <span className="meter-text">{text}</span>
      </div>
      {detail && <div className="meter-detail">{detail}</div>}
    </div>
  );
}
