import type { JobProgress } from '../api/types';
import { progressFraction } from '../format';

export function ProgressBar({ progress }: { progress: JobProgress }) {
  const { step, total_steps: total } = progress;
  const percent = Math.round(progressFraction(step, total) * 100);
  const text = total > 0 ? `${step}/${total}` : `${step}`;
  return (
    <div
      className="progress"
      data-testid="job-progress"
      role="progressbar"
      aria-label="Training progress"
      aria-valuemin={0}
      aria-valuemax={total > 0 ? total : undefined}
      aria-valuenow={step}
      aria-valuetext={total > 0 ? `step ${step} of ${total}` : `step ${step}`}
    >
      <div className="progress-track">
        <div className="progress-fill" style={{ width: `${percent}%` }} />
      </div>
      <span className="progress-text">{text}</span>
    </div>
  );
}
