import { useEffect, useRef, useState, type FormEvent } from 'react';
import { isAbort } from '../api/client';
import { newIdempotencyKey } from '../api/csrf';
import { ApiError } from '../api/errors';
import type { FieldError, Preset } from '../api/types';
import { Link, useNavigate } from 'react-router';
import { jobPath } from '../routing/routes';
import { canWrite, useSession } from '../session';
import { errorTarget, parseSubmitForm } from './specForm';
import { DatasetPanel } from './submit/DatasetPanel';
import { EstimatePanel } from './submit/EstimatePanel';
import { ModelPicker } from './submit/ModelPicker';
import { RewardPicker } from './submit/RewardPicker';

function specText(spec: unknown): string {
  return JSON.stringify(spec, null, 2);
}

/** `/new`: submit a job from a preset spec, edited as JSON. */
export function SubmitPage() {
  const { api, tenant } = useSession();
  const navigate = useNavigate();
  const [presets, setPresets] = useState<Preset[] | null>(null);
  const [presetError, setPresetError] = useState('');
  const [presetName, setPresetName] = useState('');
  const [name, setName] = useState('');
  const [spec, setSpec] = useState('{}');
  const [message, setMessage] = useState('');
  const [errors, setErrors] = useState<FieldError[]>([]);
  const [submitting, setSubmitting] = useState(false);
  const specTouched = useRef(false);
  const errorBox = useRef<HTMLDivElement>(null);

  useEffect(() => {
    const controller = new AbortController();
    api
      .listPresets(controller.signal)
      .then((list) => {
        setPresets(list);
        const first = list[0];
        if (first && !specTouched.current) {
          setPresetName(first.name);
          setSpec(specText(first.spec));
        }
      })
      .catch((e: unknown) => {
        if (isAbort(e)) return;
        setPresets([]);
        setPresetError(e instanceof Error ? e.message : String(e));
      });
    return () => controller.abort();
  }, [api]);

  useEffect(() => {
    if (errors.length || message) errorBox.current?.focus();
  }, [errors, message]);

  const choosePreset = (value: string) => {
    setPresetName(value);
    const preset = presets?.find((p) => p.name === value);
    if (preset) {
      setSpec(specText(preset.spec));
      specTouched.current = false;
      setErrors([]);
      setMessage('');
    }
  };

  const formatSpec = () => {
    try {
      setSpec(specText(JSON.parse(spec)));
    } catch {
      /* leave it; submitting reports the parse error */
    }
  };

  const onSubmit = async (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    if (submitting) return;
    const parsed = parseSubmitForm(name, spec);
    if (!parsed.ok) {
      setMessage('Fix the form before submitting.');
      setErrors(parsed.errors);
      return;
    }
    setSubmitting(true);
    setErrors([]);
    setMessage('');
    try {
      // A fresh key per click: a double-submitted request (retried by a proxy, say)
      // creates one job, while a deliberate second click creates a second one.
      const job = await api.createJob({ name: parsed.name, spec: parsed.spec }, newIdempotencyKey());
      navigate(jobPath(job.id));
    } catch (e) {
      const error = e instanceof ApiError ? e : new ApiError(0, 'error', String(e));
      setMessage(error.message);
      setErrors(error.details);
      setSubmitting(false);
    }
  };

  const invalid = new Set(errors.map((e) => errorTarget(e.field)));
  const hasFeedback = message !== '' || errors.length > 0;

  if (!canWrite(tenant)) {
    return (
      <div className="notice" role="status">
        Your role in {tenant.name} is “{tenant.role}”, which cannot submit jobs.{' '}
        <Link to="/">Back to jobs</Link>
      </div>
    );
  }

  return (
    <>
      <div className="page-head">
        <h1>New job</h1>
        <Link to="/" className="btn btn-quiet">
          Cancel
        </Link>
      </div>

      <form className="submit-form" onSubmit={onSubmit} noValidate>
        <div className="form-main">
          <div className="field">
            <label htmlFor="job-name">Name</label>
            <input
              id="job-name"
              data-testid="job-name-input"
              value={name}
              onChange={(e) => setName(e.target.value)}
              maxLength={200}
              autoComplete="off"
              placeholder="e.g. qwen-7b-gsm8k-grpo"
              aria-invalid={invalid.has('name') || undefined}
              aria-describedby={hasFeedback ? 'form-errors' : undefined}
              required
            />
          </div>

          <div className="field">
            <label htmlFor="job-preset">Preset</label>
            {presets === null ? (
              <p className="muted">Loading presets…</p>
            ) : presets.length === 0 ? (
              <p className="muted">
                {presetError ? `Presets unavailable: ${presetError}` : 'No presets defined.'} Write the
                spec by hand.
              </p>
            ) : (
              <select id="job-preset" value={presetName} onChange={(e) => choosePreset(e.target.value)}>
                {presets.map((p) => (
                  <option key={p.name} value={p.name}>
                    {p.title || p.name}
                  </option>
                ))}
              </select>
            )}
          </div>

          <div className="field">
            <label htmlFor="job-model">Model</label>
            <ModelPicker
              api={api}
              spec={spec}
              onSpecChange={(text) => {
                specTouched.current = true;
                setSpec(text);
              }}
            />
          </div>

          <div className="field">
            <label htmlFor="job-reward">Reward</label>
            <RewardPicker
              api={api}
              spec={spec}
              onSpecChange={(text) => {
                specTouched.current = true;
                setSpec(text);
              }}
            />
          </div>

          <div className="field">
            <div className="field-label-row">
              <label htmlFor="job-spec">Spec (JSON)</label>
              <button type="button" className="btn btn-quiet btn-small" onClick={formatSpec}>
                Format JSON
              </button>
            </div>
            <textarea
              id="job-spec"
              data-testid="spec-input"
              className="spec-input"
              value={spec}
              onChange={(e) => {
                specTouched.current = true;
                setSpec(e.target.value);
              }}
              rows={24}
              spellCheck={false}
              autoCapitalize="off"
              autoCorrect="off"
              aria-invalid={invalid.has('spec') || undefined}
              aria-describedby={hasFeedback ? 'form-errors' : undefined}
            />
          </div>

          <div className="form-actions">
            <button type="submit" className="btn btn-primary" data-testid="submit-job" disabled={submitting}>
              {submitting ? 'Submitting…' : 'Submit job'}
            </button>
          </div>
        </div>

        <aside className="form-side">
          {hasFeedback && (
            <div id="form-errors" className="form-errors" role="alert" tabIndex={-1} ref={errorBox}>
              <p className="form-errors-title">{message || 'The job was not submitted.'}</p>
              {errors.length > 0 && (
                <ul>
                  {errors.map((e, i) => (
                    <li key={`${e.field}:${i}`} data-testid="field-error" data-field={e.field}>
                      {e.field && <code className="field-path">{e.field}</code>} {e.message}
                    </li>
                  ))}
                </ul>
              )}
            </div>
          )}
          <p className="muted hint">
            Submitting for tenant <strong>{tenant.name}</strong>. Pick a preset, then edit its spec;
            the server checks it and lists any problems here.
          </p>
          <EstimatePanel api={api} spec={spec} />
        </aside>
      </form>

      <DatasetPanel
        api={api}
        spec={spec}
        onSpecChange={(text) => {
          specTouched.current = true;
          setSpec(text);
        }}
      />
    </>
  );
}
