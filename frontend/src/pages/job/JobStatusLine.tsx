import type { Job } from '../../api/types';
import { parseStatusReason } from './usage';

/** States in which an admitted job holds its GPUs (`borrowed` describes its last admission). */
const HOLDS_CAPACITY: ReadonlySet<string> = new Set(['starting', 'running', 'recovering', 'pausing', 'cancelling']);

type StatusFields = Pick<Job, 'status' | 'status_reason' | 'queue_position' | 'borrowed'>;

/**
 * The status chip (its text is exactly the status, `data-testid="job-status"`), the
 * queue position of a queued job, why it waits or stopped, and a badge when it runs on
 * borrowed capacity.
 */
export function JobStatusLine({ job }: { job: StatusFields }) {
  const reason = parseStatusReason(job.status_reason);
  const queued = job.status === 'queued';
  return (
    <span className="status job-status-line">
      <span className={`chip chip-${job.status}`} data-testid="job-status">
        {job.status}
      </span>
      {queued && job.queue_position !== null && (
        <span className="queue-position" data-testid="queue-position">
          #{job.queue_position} in queue
        </span>
      )}
      {reason.detail || reason.kind ? (
        <span
          className="status-reason"
          data-testid="status-reason"
          data-reason-kind={reason.kind ?? ''}
          title={reason.help || undefined}
        >
          {reason.kind && (
            <strong className={`reason-kind reason-${reason.kind}`}>{reason.kind.replace('_', ' ')}</strong>
          )}
          {reason.kind ? `: ${reason.detail}` : reason.detail}
          {reason.help && <span className="visually-hidden"> ({reason.help})</span>}
        </span>
      ) : null}
      {job.borrowed && HOLDS_CAPACITY.has(job.status) && (
        <span
          className="badge badge-borrowed"
          data-testid="borrowed-badge"
          title="Admitted on GPUs beyond your tenant's guarantee: it may be paused at a checkpoint to give them back."
        >
          borrowed capacity
        </span>
      )}
    </span>
  );
}
