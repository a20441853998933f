import type { DatasetDetail } from '../../api/types';
import { formatDateTime } from '../../format';
import { formatBytes, shortSha } from './dataset';

/** A stored dataset's facts and its first rows, as the server read them back. */
export function DatasetPreview({ detail }: { detail: DatasetDetail }) {
  return (
    <div className="dataset-preview" data-testid="dataset-preview" data-dataset={detail.name}>
      <p className="muted">
        <strong>{detail.name}</strong>: {detail.rows.toLocaleString()} row{detail.rows === 1 ? '' : 's'},{' '}
        {formatBytes(detail.size_bytes)}, sha256 <code title={detail.sha256}>{shortSha(detail.sha256)}</code>, uploaded{' '}
        {detail.created_by ? `by ${detail.created_by} ` : ''}
        <time dateTime={detail.created_at}>{formatDateTime(detail.created_at)}</time>.{' '}
        {detail.preview.length > 0 ? `The first ${detail.preview.length}:` : 'It has no rows to show.'}
      </p>
      {detail.preview.length > 0 && (
        <table className="dry-run-table">
          <thead>
            <tr>
              <th scope="col">Line</th>
              <th scope="col">Prompt</th>
              <th scope="col">Answer</th>
            </tr>
          </thead>
          <tbody>
            {detail.preview.map((r) => (
              <tr key={r.line} data-testid="dataset-preview-row">
                <td>{r.line}</td>
                <td className="dry-run-text">{r.prompt}</td>
                <td className="dry-run-text">{r.answer}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
