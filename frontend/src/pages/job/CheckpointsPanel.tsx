import type { Checkpoint } from '../../api/types';
import { formatClock, formatDateTime } from '../../format';
import { useSession } from '../../session';

interface CheckpointsPanelProps {
  /** null until the first answer. */
  checkpoints: readonly Checkpoint[] | null;
  error: string;
  totalSteps: number;
  /** Absent for viewers, who cannot clone. */
  onCloneFrom?: (step: number) => void;
}

/** Time of day for a checkpoint saved today, else the date and time. */
function savedAt(iso: string): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return d.toDateString() === new Date().toDateString() ? formatClock(iso) : formatDateTime(iso);
}

/** The job's checkpoints, newest first, each with "Clone from here" and, for a real job, "Download". */
export function CheckpointsPanel({ checkpoints, error, totalSteps, onCloneFrom }: CheckpointsPanelProps) {
  const { api } = useSession();
  const rows = checkpoints ? [...checkpoints].sort((a, b) => b.step - a.step) : [];
  const downloadable = rows.some((cp) => cp.download_url !== null);
  const actions = Boolean(onCloneFrom) || downloadable;
  return (
    <section className="panel checkpoints" aria-labelledby="checkpoints-title" data-testid="checkpoints-panel">
      <div className="section-head">
        <h2 id="checkpoints-title">Checkpoints</h2>
      </div>
      {error && (
        <div className="notice notice-error" role="alert">
          Could not load the checkpoints: {error}
        </div>
      )}
      {checkpoints === null ? (
        !error && <p className="muted">Loading checkpoints…</p>
      ) : rows.length === 0 ? (
        <p className="muted panel-empty" data-testid="checkpoints-empty">
          No checkpoints yet. One is saved every <code>trainer.save_freq</code> steps, whenever the job pauses, and at
          its last step.
        </p>
      ) : (
        <div className="panel-box checkpoints-box" tabIndex={0} aria-label="Checkpoint list">
          <table className="checkpoints-table">
            <thead>
              <tr>
                <th scope="col">Step</th>
                <th scope="col">Saved</th>
                {actions && (
                  <th scope="col">
                    <span className="visually-hidden">Actions</span>
                  </th>
                )}
              </tr>
            </thead>
            <tbody>
              {rows.map((cp) => (
                <tr key={cp.step} data-testid="checkpoint-row" data-step={cp.step}>
                  <td className="num">
                    {cp.step}
                    {totalSteps > 0 && cp.step >= totalSteps && <span className="muted"> (final)</span>}
                  </td>
                  <td className="muted">
                    <time dateTime={cp.created_at} title={formatDateTime(cp.created_at)}>
                      {savedAt(cp.created_at)}
                    </time>
                  </td>
                  {actions && (
                    <td className="actions-cell">
                      {cp.download_url !== null && (
                        <a
                          className="btn btn-small"
                          href={api.checkpointDownloadHref(cp.download_url)}
                          download
                          data-testid="download-checkpoint"
                          data-step={cp.step}
                          title="The model as a Hugging Face directory (config, safetensors, tokenizer, chat template) in a tar"
                          aria-label={`Download the model (step ${cp.step})`}
                        >
                          Download
                        </a>
                      )}
                      {onCloneFrom && (
                        <button
                          type="button"
                          className="btn btn-small"
                          data-testid="clone-from-checkpoint"
                          data-step={cp.step}
                          aria-haspopup="dialog"
                          aria-label={`Clone from here (step ${cp.step})`}
                          onClick={() => onCloneFrom(cp.step)}
                        >
                          Clone from here
                        </button>
                      )}
                    </td>
                  )}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
