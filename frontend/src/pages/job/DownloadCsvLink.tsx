import { useState, type MouseEvent } from 'react';
import { isAbort } from '../../api/client';
import { ApiError } from '../../api/errors';
import { useSession } from '../../session';

/**
 * "Download CSV": a real link to GET /metrics?format=csv (copyable, opens in a new tab);
 * a plain click fetches it with the tenant header and saves it, so it also works for a
 * tenant other than the user's default one.
 */
export function DownloadCsvLink({ jobId }: { jobId: string }) {
  const { api } = useSession();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const href = api.metricsCsvPath(jobId);
  const filename = `${jobId}-metrics.csv`;

  const onClick = async (event: MouseEvent<HTMLAnchorElement>) => {
    if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    if (busy) return;
    setBusy(true);
    setError('');
    try {
      const blob = await api.downloadMetricsCsv(jobId);
      const url = URL.createObjectURL(blob);
      const a = document.createElement('a');
      a.href = url;
      a.download = filename;
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    } catch (e) {
      if (!isAbort(e)) setError(e instanceof ApiError ? e.message : String(e));
    } finally {
      setBusy(false);
    }
  };

  return (
    <span className="csv-link">
      <a
        href={href}
        download={filename}
        className="btn btn-small"
        data-testid="metrics-csv"
        onClick={(e) => void onClick(e)}
        aria-disabled={busy || undefined}
      >
        {busy ? 'Preparing CSV…' : 'Download CSV'}
      </a>
      {error && (
        <span className="csv-error" role="alert">
          Download failed: {error}
        </span>
      )}
    </span>
  );
}
