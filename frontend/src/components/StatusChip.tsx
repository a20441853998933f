import type { Job } from '../api/types';

interface StatusChipProps {
  job: Pick<Job, 'status' | 'status_reason' | 'queue_position'>;
  /** Show the reason as text after the chip (job page) rather than only when queued. */
  showReason?: boolean;
}

/** Queue position and reason, e.g. "#3 in queue · waiting for 8 free GPUs". */
export function queueDetail(job: StatusChipProps['job']): string {
  const parts: string[] = [];
  if (job.status === 'queued' && job.queue_position !== null) parts.push(`#${job.queue_position} in queue`);
  if (job.status_reason) parts.push(job.status_reason);
  return parts.join(' · ');
}

/**
 * The status as a coloured chip. The chip's text is exactly the status string
 * (`data-testid="job-status"`); the queue position and reason follow it.
 */
export function StatusChip({ job, showReason = false }: StatusChipProps) {
  const detail = job.status === 'queued' || showReason ? queueDetail(job) : '';
  return (
    <span className="status" title={job.status_reason || undefined}>
      <span className={`chip chip-${job.status}`} data-testid="job-status">
        {job.status}
      </span>
      {detail && <span className="status-detail">{detail}</span>}
    </span>
  );
}
