import type { Job } from '../../api/types';
import { formatDateTime } from '../../format';
import { Link } from 'react-router';
import { jobPath } from '../../routing/routes';
import { formatDevices, formatGpuHours } from './usage';

/** The job's facts: resources, usage so far, scheduling, timestamps, lineage. */
export function JobFacts({ job }: { job: Job }) {
  return (
    <dl className="job-facts" data-testid="job-facts">
      <div>
        <dt>GPUs</dt>
        <dd data-testid="job-gpus">{formatDevices(job.num_gpus, job.device_type)}</dd>
      </div>
      <div>
        <dt>GPU time so far</dt>
        <dd data-testid="job-gpu-hours" title={`${Math.round(job.gpu_seconds).toLocaleString('en-US')} GPU-seconds`}>
          {formatGpuHours(job.gpu_seconds)}
        </dd>
      </div>
      <div>
        <dt>Priority</dt>
        <dd data-testid="job-priority">{job.priority}</dd>
      </div>
      <div>
        <dt>Attempt</dt>
        <dd data-testid="job-attempt">{job.attempt}</dd>
      </div>
      <div>
        <dt>Tags</dt>
        <dd data-testid="job-tags">
          {job.tags.length === 0 ? (
            <span className="muted">none</span>
          ) : (
            <ul className="tag-list">
              {job.tags.map((t) => (
                <li key={t} className="tag">
                  {t}
                </li>
              ))}
            </ul>
          )}
        </dd>
      </div>
      {job.failure_class && (
        <div>
          <dt>Failure</dt>
          <dd data-testid="job-failure-class">{job.failure_class.replace(/_/g, ' ')}</dd>
        </div>
      )}
      <div>
        <dt>Created</dt>
        <dd>{formatDateTime(job.created_at)}</dd>
      </div>
      <div>
        <dt>Started</dt>
        <dd>{formatDateTime(job.started_at)}</dd>
      </div>
      <div>
        <dt>Finished</dt>
        <dd>{formatDateTime(job.finished_at)}</dd>
      </div>
      {job.cloned_from && (
        <div>
          <dt>Cloned from</dt>
          <dd>
            <Link to={jobPath(job.cloned_from)} data-testid="cloned-from">
              <code>{job.cloned_from.slice(0, 8)}</code>
            </Link>
          </dd>
        </div>
      )}
      <div>
        <dt>ID</dt>
        <dd>
          <code>{job.id}</code>
        </dd>
      </div>
    </dl>
  );
}
