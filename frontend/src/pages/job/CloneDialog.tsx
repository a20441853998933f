import { useEffect, useId, useRef, useState, type FormEvent } from 'react';
import { ApiError } from '../../api/errors';
import type { Checkpoint, Job } from '../../api/types';
import { ApiErrorNotice } from '../../components/ApiErrorNotice';
import { useNavigate } from 'react-router';
import { jobPath } from '../../routing/routes';
import { useSession } from '../../session';
import { actionErrorTitle, checkpointChoices, cloneBody, fieldHasError, parseOverrides } from './actions';

interface CloneDialogProps {
  job: Job;
  checkpoints: readonly Checkpoint[];
  /** The checkpoint select's first value: LATEST, "0" or a step. */
  initialCheckpoint: string;
  onClose: () => void;
}

/**
 * A modal form (a native <dialog>: focus stays inside, Escape closes it) that clones the
 * job from a checkpoint with optional spec overrides, then opens the new job's page.
 * Mounted when opened, unmounted when closed, so each opening starts fresh.
 */
export function CloneDialog({ job, checkpoints, initialCheckpoint, onClose }: CloneDialogProps) {
  const { api } = useSession();
  const navigate = useNavigate();
  const ref = useRef<HTMLDialogElement>(null);
  const ids = useId();
  const [name, setName] = useState('');
  const [checkpoint, setCheckpoint] = useState(initialCheckpoint);
  const [overrides, setOverrides] = useState('');
  const [overridesError, setOverridesError] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | null>(null);

  useEffect(() => {
    const dialog = ref.current;
    if (dialog && !dialog.open) dialog.showModal();
  }, []);

  const choices = checkpointChoices(checkpoints, job.progress.total_steps);
  // A step chosen elsewhere ("Clone from here") is offered even before the list catches up.
  if (!choices.some((c) => c.value === checkpoint)) choices.push({ value: checkpoint, label: `Step ${checkpoint}` });

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    const parsed = parseOverrides(overrides);
    if (!parsed.ok) {
      setOverridesError(`overrides ${parsed.message}`);
      document.getElementById(`${ids}-overrides`)?.focus();
      return;
    }
    setOverridesError('');
    setError(null);
    setBusy(true);
    try {
      const clone = await api.cloneJob(job.id, cloneBody({ name, checkpoint, overrides: parsed.value }));
      navigate(jobPath(clone.id));
    } catch (e) {
      setError(e instanceof ApiError ? e : new ApiError(0, 'error', String(e)));
      setBusy(false);
    }
  };

  const details = error?.details ?? [];
  const nameBad = fieldHasError(details, 'name');
  const checkpointBad = fieldHasError(details, 'checkpoint_step');
  const overridesBad = Boolean(overridesError) || fieldHasError(details, 'overrides');
  const errorId = `${ids}-error`;

  return (
    <dialog
      ref={ref}
      className="clone-dialog"
      aria-labelledby={`${ids}-title`}
      data-testid="clone-dialog"
      onClose={onClose}
      onCancel={(e) => {
        if (busy) e.preventDefault(); // Escape does not drop a request in flight
      }}
    >
      <form onSubmit={submit} noValidate>
        <h2 id={`${ids}-title`}>Clone {job.name}</h2>
        <p className="muted hint">
          A new job with this job's spec, trained on from the checkpoint you pick. Overrides are merged into the
          spec.
        </p>
        <div className="field">
          <label htmlFor={`${ids}-name`}>Name</label>
          <input
            id={`${ids}-name`}
            data-testid="clone-name"
            value={name}
            maxLength={120}
            placeholder={`${job.name} (clone)`}
            onChange={(e) => setName(e.target.value)}
            aria-invalid={nameBad || undefined}
            aria-describedby={nameBad ? errorId : undefined}
          />
        </div>
        <div className="field">
          <label htmlFor={`${ids}-checkpoint`}>Start from</label>
          <select
            id={`${ids}-checkpoint`}
            data-testid="clone-checkpoint"
            value={checkpoint}
            onChange={(e) => setCheckpoint(e.target.value)}
            aria-invalid={checkpointBad || undefined}
            aria-describedby={checkpointBad ? errorId : undefined}
          >
            {choices.map((c) => (
              <option key={c.value} value={c.value}>
                {c.label}
              </option>
            ))}
          </select>
        </div>
        <div className="field">
          <label htmlFor={`${ids}-overrides`}>
            Overrides <span className="muted">(optional JSON object)</span>
          </label>
          <textarea
            id={`${ids}-overrides`}
            data-testid="clone-overrides"
            className="clone-overrides"
            rows={5}
            spellCheck={false}
            value={overrides}
            placeholder='{"trainer": {"total_steps": 200}}'
            onChange={(e) => setOverrides(e.target.value)}
            aria-invalid={overridesBad || undefined}
            aria-describedby={overridesError ? `${ids}-overrides-error` : overridesBad ? errorId : undefined}
          />
          {overridesError && (
            <p className="field-message" id={`${ids}-overrides-error`} data-testid="field-error" role="alert">
              {overridesError}
            </p>
          )}
        </div>
        {error && (
          <ApiErrorNotice id={errorId} testId="clone-error" title={actionErrorTitle('clone', error)} error={error} />
        )}
        <div className="dialog-actions">
          <button type="button" className="btn" onClick={() => ref.current?.close()} disabled={busy}>
            Cancel
          </button>
          <button type="submit" className="btn btn-primary" data-testid="clone-submit" disabled={busy}>
            {busy ? 'Cloning…' : 'Clone job'}
          </button>
        </div>
      </form>
    </dialog>
  );
}
