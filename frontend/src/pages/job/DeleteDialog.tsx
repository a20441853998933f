import { useEffect, useId, useRef, useState } from 'react';
import { ApiError } from '../../api/errors';
import type { Job } from '../../api/types';
import { ApiErrorNotice } from '../../components/ApiErrorNotice';
import { useQueryClient } from '@tanstack/react-query';
import { useNavigate } from 'react-router';
import { queryKeys } from '../../query/keys';
import { useSession } from '../../session';
import { actionErrorTitle } from './actions';

interface DeleteDialogProps {
  job: Job;
  onClose: () => void;
}

/**
 * Asks before deleting an ended job (a native modal <dialog>: Escape or Cancel keeps it),
 * then deletes it and returns to the jobs list. What goes and what stays is said up front:
 * deletion cannot be undone, and the job's usage stays billed.
 */
export function DeleteDialog({ job, onClose }: DeleteDialogProps) {
  const { api, tenant } = useSession();
  const client = useQueryClient();
  const navigate = useNavigate();
  const ref = useRef<HTMLDialogElement>(null);
  const ids = useId();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | null>(null);

  useEffect(() => {
    const dialog = ref.current;
    if (dialog && !dialog.open) dialog.showModal();
  }, []);

  const confirm = async () => {
    setError(null);
    setBusy(true);
    try {
      await api.deleteJob(job.id);
      // The job is gone: drop what is cached for it, and the lists that still name it.
      client.removeQueries({ queryKey: queryKeys.job(tenant.slug, job.id) });
      client.removeQueries({ queryKey: queryKeys.jobsLists(tenant.slug) });
      navigate('/');
    } catch (e) {
      setError(e instanceof ApiError ? e : new ApiError(0, 'error', String(e)));
      setBusy(false);
    }
  };

  return (
    <dialog
      ref={ref}
      className="clone-dialog"
      aria-labelledby={`${ids}-title`}
      aria-describedby={`${ids}-what`}
      data-testid="delete-dialog"
      onClose={onClose}
      onCancel={(e) => {
        if (busy) e.preventDefault(); // Escape does not drop a request in flight
      }}
    >
      <h2 id={`${ids}-title`}>Delete {job.name}?</h2>
      <p id={`${ids}-what`}>
        The job, its checkpoints (with their files), samples, logs and metrics are deleted for good. Its usage stays
        in your tenant's ledger.
      </p>
      {error && <ApiErrorNotice testId="delete-error" title={actionErrorTitle('delete', error)} error={error} />}
      <div className="dialog-actions">
        <button type="button" className="btn" onClick={() => ref.current?.close()} disabled={busy} autoFocus>
          Keep it
        </button>
        <button
          type="button"
          className="btn btn-danger"
          data-testid="delete-confirm"
          onClick={() => void confirm()}
          disabled={busy}
        >
          {busy ? 'Deleting…' : 'Delete job'}
        </button>
      </div>
    </dialog>
  );
}
