import type { StreamState } from '../live/jobStream';

const LABELS: Record<StreamState, string> = {
  connecting: 'connecting',
  live: 'live',
  reconnecting: 'reconnecting',
  ended: 'ended',
  unauthenticated: 'signed out',
  not_found: 'unavailable',
};

/** The event stream's state: "live" while the socket is open, "reconnecting" after a drop. */
export function LiveIndicator({ state }: { state: StreamState }) {
  return (
    <span className={`live live-${state}`} data-testid="live-indicator" data-state={state} role="status">
      <span className="live-dot" aria-hidden="true" />
      {LABELS[state]}
    </span>
  );
}
