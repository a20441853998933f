import { useState } from 'react';
import { ApiError } from '../../api/errors';
import type { Job } from '../../api/types';
import { isTerminal } from '../../api/types';
import { ApiErrorNotice } from '../../components/ApiErrorNotice';
import { useSession } from '../../session';
import { actionErrorTitle, canCancel, canDelete, canPause, canResume, type JobAction } from './actions';

function asApiError(e: unknown): ApiError {
  return e instanceof ApiError ? e : new ApiError(0, 'error', String(e));
}

interface JobActionsProps {
  job: Job;
  /** The job as an action's response left it. */
  onJob: (job: Job) => void;
  /** Reload the job (after a 409: its state moved on under us). */
  onStale: () => void;
  /** Open the clone form. */
  onClone: () => void;
  /** Open the delete confirmation (ended jobs only). */
  onDelete: () => void;
}

type Running = Exclude<JobAction, 'clone' | 'delete'>;

/**
 * Pause / Resume / Cancel / Clone / Delete for a job, each shown where it applies. One request at
 * a time: every button is disabled while one is in flight. Failures show inline with
 * the server's field details.
 */
export function JobActions({ job, onJob, onStale, onClone, onDelete }: JobActionsProps) {
  const { api } = useSession();
  const [busy, setBusy] = useState<Running | null>(null);
  const [failure, setFailure] = useState<{ action: Running; error: ApiError } | null>(null);

  const run = async (action: Running) => {
    setBusy(action);
    setFailure(null);
    try {
      const updated =
        action === 'pause'
          ? await api.pauseJob(job.id)
          : action === 'resume'
            ? await api.resumeJob(job.id)
            : await api.cancelJob(job.id);
      onJob(updated);
    } catch (e) {
      const error = asApiError(e);
      setFailure({ action, error });
      if (error.status === 409) onStale();
    } finally {
      setBusy(null);
    }
  };

  const status = job.status;
  const showPause = canPause(status) || status === 'pausing';
  const showCancel = !isTerminal(status);

  return (
    <div className="job-actions-wrap">
      <div className="job-actions" role="group" aria-label="Job actions">
        {showPause && (
          <button
            type="button"
            className="btn"
            data-testid="pause-job"
            onClick={() => void run('pause')}
            disabled={busy !== null || !canPause(status)}
          >
            {busy === 'pause' || status === 'pausing' ? 'Pausing…' : 'Pause'}
          </button>
        )}
        {canResume(status) && (
          <button
            type="button"
            className="btn btn-primary"
            data-testid="resume-job"
            onClick={() => void run('resume')}
            disabled={busy !== null}
          >
            {busy === 'resume' ? 'Resuming…' : 'Resume'}
          </button>
        )}
        <button
          type="button"
          className="btn"
          data-testid="clone-job"
          onClick={onClone}
          disabled={busy !== null}
          aria-haspopup="dialog"
        >
          Clone…
        </button>
        {showCancel && (
          <button
            type="button"
            className="btn btn-danger"
            data-testid="cancel-job"
            onClick={() => void run('cancel')}
            disabled={busy !== null || !canCancel(status)}
          >
            {busy === 'cancel' || status === 'cancelling' ? 'Cancelling…' : 'Cancel job'}
          </button>
        )}
        {canDelete(status) && (
          <button
            type="button"
            className="btn btn-danger"
            data-testid="delete-job"
            onClick={onDelete}
            disabled={busy !== null}
            aria-haspopup="dialog"
          >
            Delete…
          </button>
        )}
      </div>
      {failure && (
        <ApiErrorNotice
          testId="action-error"
          title={actionErrorTitle(failure.action, failure.error)}
          error={failure.error}
          onDismiss={() => setFailure(null)}
        />
      )}
    </div>
  );
}
