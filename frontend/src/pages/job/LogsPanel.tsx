import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useId, useLayoutEffect, useRef, useState } from 'react';
import { formatClock } from '../../format';
import { asApiError } from '../../query/client';
import { queryKeys } from '../../query/keys';
import { useSession } from '../../session';
import { EMPTY_LOGS, applyLogPage, hasMore, type LogState } from './logCursor';

const FOLLOW_MS = 2_000;
/** Full pages read back to back in one go before waiting for the next poll. */
const MAX_CATCH_UP_PAGES = 5;

/**
 * The job's log lines from GET /logs?after=<seq>, polled every 2 s while "Follow" is on
 * (and the job can still write any), else loaded when the panel opens and on demand; the
 * box stays scrolled to the newest line while the reader is at the bottom.
 */
export function LogsPanel({ jobId, terminal }: { jobId: string; terminal: boolean }) {
  const { api, tenant } = useSession();
  const client = useQueryClient();
  const followId = useId();
  const [follow, setFollow] = useState(true);
  const boxRef = useRef<HTMLDivElement>(null);
  const stickToBottom = useRef(true);

  // The cached lines are the state the next request's cursor comes from: each fetch reads
  // on from them, so a refetch adds only new lines.
  const logsKey = queryKeys.logs(tenant.slug, jobId);
  const polling = follow && !terminal;
  const logsQuery = useQuery({
    queryKey: logsKey,
    queryFn: async ({ signal }) => {
      let state = client.getQueryData<LogState>(logsKey) ?? EMPTY_LOGS;
      for (let i = 0; i < MAX_CATCH_UP_PAGES; i++) {
        const page = await api.getJobLogs(jobId, state.cursor, signal);
        // Overlapping requests are harmless: lines at or before the cursor are ignored.
        state = applyLogPage(state, page);
        if (!hasMore(page)) break;
      }
      return state;
    },
    refetchInterval: polling ? FOLLOW_MS : false,
  });
  const logs = logsQuery.data ?? EMPTY_LOGS;
  const loaded = logsQuery.data !== undefined;
  const error = logsQuery.error ? asApiError(logsQuery.error).message : '';
  const refresh = () => void logsQuery.refetch();

  useLayoutEffect(() => {
    const box = boxRef.current;
    if (box && follow && stickToBottom.current) box.scrollTop = box.scrollHeight;
  }, [logs, follow]);

  const onScroll = () => {
    const box = boxRef.current;
    if (box) stickToBottom.current = box.scrollHeight - box.scrollTop - box.clientHeight < 24;
  };

  return (
    <section className="panel logs" aria-labelledby="logs-title" data-testid="logs-panel">
      <div className="section-head">
        <h2 id="logs-title">Logs</h2>
        <div className="panel-tools">
          {terminal ? (
            <span className="muted">Job ended</span>
          ) : (
            <label className="follow-toggle" htmlFor={followId}>
              <input
                id={followId}
                type="checkbox"
                role="switch"
                data-testid="logs-follow"
                checked={follow}
                onChange={(e) => {
                  setFollow(e.target.checked);
                  stickToBottom.current = true;
                }}
              />
              Follow
            </label>
          )}
          {!polling && (
            <button type="button" className="btn btn-small" data-testid="logs-refresh" onClick={refresh}>
              Load new lines
            </button>
          )}
        </div>
      </div>
      {error && (
        <div className="notice notice-error" role="alert">
          Could not load the logs: {error}
        </div>
      )}
      <div
        className="panel-box logs-box"
        ref={boxRef}
        onScroll={onScroll}
        tabIndex={0}
        aria-label="Log lines"
        data-following={polling}
      >
        {logs.dropped > 0 && (
          <p className="muted logs-dropped">{logs.dropped.toLocaleString('en-US')} older lines not shown.</p>
        )}
        {logs.lines.length === 0 ? (
          <p className="muted panel-empty" data-testid="logs-empty">
            {loaded ? 'No log lines yet.' : 'Loading logs…'}
          </p>
        ) : (
          <ol className="log-lines">
            {logs.lines.map((line) => {
              const level = line.level.toLowerCase();
              return (
                <li key={line.seq} className={`log-line level-${level}`} data-testid="log-line" data-seq={line.seq}>
                  <time className="log-time" dateTime={line.created_at} title={line.created_at}>
                    {formatClock(line.created_at)}
                  </time>
                  <span className="log-level">{level}</span>
                  <span className="log-message">{line.message}</span>
                </li>
              );
            })}
          </ol>
        )}
      </div>
    </section>
  );
}
