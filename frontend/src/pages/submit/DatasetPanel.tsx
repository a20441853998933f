import { useCallback, useEffect, useId, useState, type ChangeEvent } from 'react';
import { isAbort, type ApiClient } from '../../api/client';
import { ApiError } from '../../api/errors';
import type { Dataset, DatasetDetail, DryRunResult, GraderName } from '../../api/types';
import { formatReward, rewardTone } from '../job/samples';
import {
  GRADERS,
  datasetInSpec,
  datasetNameFromFile,
  isParquet,
  formatBytes,
  rowProblems,
  selectionAfterDelete,
  withDataset,
  type RowProblem,
} from './dataset';
import { DatasetPreview } from './DatasetPreview';
import './submit.css';

const MAX_UPLOAD_BYTES = 10 * 1024 * 1024;

type UploadState =
  | { kind: 'idle' }
  | { kind: 'uploading'; file: string }
  | { kind: 'done'; dataset: Dataset }
  | { kind: 'failed'; file: string; message: string; problems: RowProblem[] };

function asApiError(e: unknown): ApiError {
  return e instanceof ApiError ? e : new ApiError(0, 'error', e instanceof Error ? e.message : String(e));
}

/**
 * The submit page's dataset section: upload a JSONL file of `{"prompt", "answer"}` rows (or Parquet)
 * (bad rows are listed at their lines), pick one for `data.train_files`, choose the grader,
 * and dry-run it: the first rows graded as training would, a perfect reply each.
 */
export function DatasetPanel({
  api,
  spec,
  onSpecChange,
}: {
  api: ApiClient;
  spec: string;
  onSpecChange: (text: string) => void;
}) {
  const ids = useId();
  const [datasets, setDatasets] = useState<Dataset[] | null>(null);
  const [listError, setListError] = useState('');
  const [name, setName] = useState('');
  const [upload, setUpload] = useState<UploadState>({ kind: 'idle' });
  const [selected, setSelected] = useState('');
  const [grader, setGrader] = useState<GraderName>('numeric');
  const [applyError, setApplyError] = useState('');
  const [dryRun, setDryRun] = useState<DryRunResult[] | null>(null);
  const [dryRunError, setDryRunError] = useState('');
  const [running, setRunning] = useState(false);
  const [preview, setPreview] = useState<DatasetDetail | null>(null);
  const [previewError, setPreviewError] = useState('');
  const [previewing, setPreviewing] = useState(false);
  const [confirmDelete, setConfirmDelete] = useState(false);
  const [deleteError, setDeleteError] = useState('');
  const [deleting, setDeleting] = useState(false);
  const [deleted, setDeleted] = useState('');

  /** Another dataset picked (or this one gone): what was shown of the last one goes. */
  const pick = (next: string) => {
    setSelected(next);
    setDryRun(null);
    setPreview(null);
    setPreviewError('');
    setConfirmDelete(false);
    setDeleteError('');
  };

  const refresh = useCallback(
    async (signal?: AbortSignal) => {
      try {
        const list = await api.listDatasets(signal);
        setDatasets(list);
        setListError('');
        setSelected((current) => current || datasetInSpec(spec) || list[0]?.name || '');
      } catch (e) {
        if (isAbort(e)) return;
        setDatasets([]);
        setListError(asApiError(e).message);
      }
    },
    // The spec only seeds the first choice; re-listing on every keystroke is not wanted.
    [api],
  );

  useEffect(() => {
    const controller = new AbortController();
    void refresh(controller.signal);
    return () => controller.abort();
  }, [refresh]);

  const onFile = async (event: ChangeEvent<HTMLInputElement>) => {
    const file = event.target.files?.[0];
    event.target.value = ''; // choosing the same file again uploads it again
    if (!file) return;
    const datasetName = name.trim() || datasetNameFromFile(file.name);
    if (file.size > MAX_UPLOAD_BYTES) {
      setUpload({
        kind: 'failed',
        file: file.name,
        message: `${file.name} is ${formatBytes(file.size)}; a dataset may be at most ${formatBytes(MAX_UPLOAD_BYTES)}.`,
        problems: [],
      });
      return;
    }
    setUpload({ kind: 'uploading', file: file.name });
    try {
      // Parquet is binary: sent as the file itself; JSONL as its text, as before.
      const dataset = isParquet(file.name)
        ? await api.uploadDatasetFile(datasetName, file, file.name)
        : await api.uploadDataset(datasetName, await file.text());
      setUpload({ kind: 'done', dataset });
      pick(dataset.name);
      setDeleted('');
      setName('');
      await refresh();
    } catch (e) {
      const error = asApiError(e);
      setUpload({ kind: 'failed', file: file.name, message: error.message, problems: rowProblems(error.details) });
    }
  };

  const applyToSpec = () => {
    if (!selected) return;
    const edit = withDataset(spec, selected, grader);
    if (edit.ok) {
      setApplyError('');
      onSpecChange(edit.text);
    } else {
      setApplyError(`Could not set data.train_files: ${edit.error}`);
    }
  };

  const runDryRun = async () => {
    if (!selected || running) return;
    setRunning(true);
    setDryRunError('');
    try {
      setDryRun(await api.dryRunGrader({ grader, dataset: selected }));
    } catch (e) {
      setDryRun(null);
      setDryRunError(asApiError(e).message);
    } finally {
      setRunning(false);
    }
  };

  const showPreview = async () => {
    if (!selected || previewing) return;
    if (preview?.name === selected) {
      setPreview(null); // the button toggles
      return;
    }
    setPreviewing(true);
    setPreviewError('');
    try {
      setPreview(await api.getDataset(selected));
    } catch (e) {
      setPreview(null);
      setPreviewError(asApiError(e).message);
    } finally {
      setPreviewing(false);
    }
  };

  const deleteSelected = async () => {
    if (!selected || deleting) return;
    const name = selected;
    setDeleting(true);
    setDeleteError('');
    try {
      await api.deleteDataset(name);
      const before = (datasets ?? []).map((d) => d.name);
      setDatasets((list) => (list ?? []).filter((d) => d.name !== name));
      pick(selectionAfterDelete(before, name));
      setDeleted(name);
      if (upload.kind === 'done' && upload.dataset.name === name) setUpload({ kind: 'idle' });
      await refresh();
    } catch (e) {
      setDeleteError(asApiError(e).message);
      setConfirmDelete(false);
    } finally {
      setDeleting(false);
    }
  };

  const inSpec = datasetInSpec(spec);

  return (
    <section className="dataset-panel" aria-labelledby={`${ids}-title`} data-testid="dataset-panel">
      <div className="section-head">
        <h2 id={`${ids}-title`}>Dataset</h2>
        <span className="muted">
          {inSpec ? (
            <>
              This job trains on <code>{inSpec}</code>.
            </>
          ) : (
            'Optional: train on your own prompts and answers.'
          )}
        </span>
      </div>
      <p className="muted">
        A <code>.jsonl</code> file, one <code>{'{"prompt": "...", "answer": "..."}'}</code> per line (or chat{' '}
        <code>messages</code> in place of <code>prompt</code>), or a <code>.parquet</code> file in verl&apos;s layout
        (at most 10 MiB and 100,000 rows). Every row is checked on upload.
      </p>

      <div className="dataset-upload">
        <div className="field">
          <label htmlFor={`${ids}-name`}>Name</label>
          <input
            id={`${ids}-name`}
            data-testid="dataset-name-input"
            value={name}
            onChange={(e) => setName(e.target.value)}
            maxLength={100}
            placeholder="from the file name"
            autoComplete="off"
          />
        </div>
        <div className="field">
          <label htmlFor={`${ids}-file`}>Upload a JSONL file</label>
          <input
            id={`${ids}-file`}
            data-testid="dataset-file"
            type="file"
            accept=".jsonl,.json,.txt,.parquet,application/jsonl,application/x-ndjson,text/plain,application/vnd.apache.parquet"
            onChange={(e) => void onFile(e)}
            disabled={upload.kind === 'uploading'}
          />
        </div>
      </div>

      <div aria-live="polite">
        {upload.kind === 'uploading' && <p className="muted">Checking {upload.file}…</p>}
        {upload.kind === 'done' && (
          <p className="dataset-ok" data-testid="dataset-upload-result">
            Uploaded <strong>{upload.dataset.name}</strong>: {upload.dataset.rows.toLocaleString()} row
            {upload.dataset.rows === 1 ? '' : 's'}, {formatBytes(upload.dataset.size_bytes)}.
          </p>
        )}
        {upload.kind === 'failed' && (
          <div className="form-errors" role="alert" data-testid="dataset-upload-error">
            <p className="form-errors-title">
              {upload.file} was not stored: {upload.message}
            </p>
            {upload.problems.length > 0 && (
              <ul>
                {upload.problems.map((p, i) => (
                  <li key={`${p.line ?? 'x'}:${i}`} data-testid="dataset-row-error" data-line={p.line ?? undefined}>
                    {p.message}
                  </li>
                ))}
              </ul>
            )}
          </div>
        )}
      </div>

      {listError && (
        <div className="notice notice-error" role="alert">
          Could not load your datasets: {listError}
        </div>
      )}

      <div className="dataset-choice">
        <div className="field">
          <label htmlFor={`${ids}-pick`}>Dataset</label>
          {datasets === null ? (
            <p className="muted">Loading datasets…</p>
          ) : datasets.length === 0 ? (
            <p className="muted">No datasets uploaded yet.</p>
          ) : (
            <select
              id={`${ids}-pick`}
              data-testid="dataset-select"
              value={selected}
              onChange={(e) => pick(e.target.value)}
            >
              {datasets.map((d) => (
                <option key={d.name} value={d.name}>
                  {d.name} ({d.rows.toLocaleString()} rows)
                </option>
              ))}
            </select>
          )}
        </div>
        <div className="field">
          <label htmlFor={`${ids}-grader`}>Grader</label>
          <select
            id={`${ids}-grader`}
            data-testid="grader-select"
            value={grader}
            onChange={(e) => {
              setGrader(e.target.value as GraderName);
              setDryRun(null);
            }}
          >
            {GRADERS.map((g) => (
              <option key={g.name} value={g.name}>
                {g.title}
              </option>
            ))}
          </select>
        </div>
        <div className="dataset-actions">
          <button
            type="button"
            className="btn"
            data-testid="use-dataset"
            onClick={applyToSpec}
            disabled={!selected}
            title="Set data.train_files and data.grader in the spec"
          >
            Use in spec
          </button>
          <button
            type="button"
            className="btn"
            data-testid="dry-run"
            onClick={() => void runDryRun()}
            disabled={!selected || running}
          >
            {running ? 'Grading…' : 'Dry run'}
          </button>
          <button
            type="button"
            className="btn"
            data-testid="preview-dataset"
            onClick={() => void showPreview()}
            disabled={!selected || previewing}
            aria-expanded={preview !== null}
          >
            {previewing ? 'Loading…' : preview ? 'Hide preview' : 'Preview'}
          </button>
          {!confirmDelete && (
            <button
              type="button"
              className="btn btn-danger"
              data-testid="delete-dataset"
              onClick={() => {
                setConfirmDelete(true);
                setDeleteError('');
              }}
              disabled={!selected || deleting}
            >
              Delete…
            </button>
          )}
        </div>
      </div>
      {confirmDelete && selected && (
        <div className="notice dataset-confirm" role="alertdialog" aria-label={`Delete ${selected}?`}>
          <span>
            Delete <strong>{selected}</strong> for good? Jobs that finished keep their results; an unfinished job
            reading it stops the deletion.
          </span>
          <button
            type="button"
            className="btn btn-danger"
            data-testid="confirm-delete-dataset"
            onClick={() => void deleteSelected()}
            disabled={deleting}
          >
            {deleting ? 'Deleting…' : `Delete ${selected}`}
          </button>
          <button
            type="button"
            className="btn btn-quiet"
            data-testid="cancel-delete-dataset"
            onClick={() => setConfirmDelete(false)}
            disabled={deleting}
          >
            Keep it
          </button>
        </div>
      )}
      <div aria-live="polite">
        {deleted && (
          <p className="dataset-ok" data-testid="dataset-deleted">
            Deleted <strong>{deleted}</strong>.
            {inSpec === deleted && ' The spec still names it in data.train_files: pick another dataset or remove it.'}
          </p>
        )}
      </div>
      {deleteError && (
        <div className="notice notice-error" role="alert" data-testid="delete-dataset-error">
          Could not delete the dataset: {deleteError}
        </div>
      )}
      {previewError && (
        <div className="notice notice-error" role="alert" data-testid="preview-dataset-error">
          Could not load the preview: {previewError}
        </div>
      )}
      {preview && <DatasetPreview detail={preview} />}
      {applyError && (
        <div className="notice notice-error" role="alert">
          {applyError}
        </div>
      )}
      {dryRunError && (
        <div className="notice notice-error" role="alert" data-testid="dry-run-error">
          Dry run failed: {dryRunError}
        </div>
      )}

      {dryRun !== null && (
        <div className="dry-run" data-testid="dry-run-results">
          <p className="muted">
            The first {dryRun.length} row{dryRun.length === 1 ? '' : 's'} of <code>{selected}</code>, each answered
            perfectly (<code>#### answer</code>) and graded by <code>{grader}</code>: anything below 1 is a row this grader
            cannot reward.
          </p>
          <table className="dry-run-table">
            <thead>
              <tr>
                <th scope="col">Line</th>
                <th scope="col">Prompt</th>
                <th scope="col">Answer</th>
                <th scope="col">Completion</th>
                <th scope="col">Reward</th>
              </tr>
            </thead>
            <tbody>
              {dryRun.map((r) => (
                <tr key={r.line} data-testid="dry-run-row">
                  <td>{r.line}</td>
                  <td className="dry-run-text">{r.prompt}</td>
                  <td className="dry-run-text">{r.answer}</td>
                  <td className="dry-run-text">
                    <code>{r.completion}</code>
                  </td>
                  <td>
                    <span className={`dry-run-reward dry-run-reward-${rewardTone(r.reward)}`} data-testid="dry-run-reward">
                      {formatReward(r.reward)}
                    </span>
                    {r.problem && <div className="dry-run-problem">{r.problem}</div>}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
