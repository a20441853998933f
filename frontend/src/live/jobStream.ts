import type { JobEvent } from '../api/types';
import { parseEventMessage } from './eventLog';

/**
 * connecting: first attempt in progress; live: socket open; reconnecting: waiting for
 * or making another attempt after a drop; ended: closed and not coming back (the job
 * finished, or the page stopped the stream); unauthenticated / not_found: the server
 * refused the socket with 4401 / 4404, so retrying cannot help.
 */
export type StreamState =
  | 'connecting'
  | 'live'
  | 'reconnecting'
  | 'ended'
  | 'unauthenticated'
  | 'not_found';

export const CLOSE_UNAUTHENTICATED = 4401;
export const CLOSE_NOT_FOUND = 4404;

const BACKOFF_FIRST_MS = 1_000;
const BACKOFF_MAX_MS = 10_000;
/** A connection that lived this long counts as healthy: the next retry starts at 1 s. */
const HEALTHY_AFTER_MS = 5_000;

/** Delay before reconnect attempt `attempt` (0-based): 1 s, 2 s, 4 s, 8 s, then 10 s. */
export function backoffDelayMs(attempt: number): number {
  return Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** Math.max(0, attempt));
}

/** The part of the browser WebSocket this module uses, so tests can pass a fake. */
export interface SocketLike {
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code: number }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  close(code?: number): void;
}

export interface JobStreamOptions {
  jobId: string;
  /** Events with seq above this are wanted; 0 replays the whole stored history. */
  after?: number;
  /** Replay only these kinds of stored event (all kinds live); default every kind. */
  replayKinds?: readonly string[];
  /** Receives events in increasing seq, each exactly once, batched every `batchMs`. */
  onEvents: (events: JobEvent[]) => void;
  onState: (state: StreamState) => void;
  /** Asked after an unexpected close; false (the job is terminal) stops retrying. */
  shouldReconnect?: () => boolean;
  batchMs?: number;
  createSocket?: (url: string) => SocketLike;
  /** Origin of the socket, e.g. `{protocol: 'https:', host: 'rl.example.com'}`. */
  location?: { protocol: string; host: string };
  now?: () => number;
}

export function jobStreamUrl(
  loc: { protocol: string; host: string },
  jobId: string,
  after: number,
  replayKinds?: readonly string[],
): string {
  const scheme = loc.protocol === 'https:' ? 'wss:' : 'ws:';
  const replay = replayKinds && replayKinds.length ? `&replay=${replayKinds.map(encodeURIComponent).join(',')}` : '';
  return `${scheme}//${loc.host}/ws/jobs/${encodeURIComponent(jobId)}/?after=${after}${replay}`;
}

/**
 * A job's event stream that survives disconnects. It remembers the last seq it passed
 * on and reconnects with `?after=<that seq>`, so a replay neither repeats nor skips an
 * event; anything at or below that seq that still arrives is dropped.
 */
export class JobStream {
  private readonly opts: JobStreamOptions;
  private readonly batchMs: number;
  private readonly now: () => number;
  private socket: SocketLike | null = null;
  private lastSeq: number;
  private attempt = 0;
  private openedAt = 0;
  private gotMessage = false;
  private retryTimer: ReturnType<typeof setTimeout> | null = null;
  private flushTimer: ReturnType<typeof setTimeout> | null = null;
  private pending: JobEvent[] = [];
  private stopped = false;
  private state: StreamState | null = null;

  constructor(opts: JobStreamOptions) {
    this.opts = opts;
    this.lastSeq = opts.after ?? 0;
    this.batchMs = opts.batchMs ?? 100;
    this.now = opts.now ?? Date.now;
  }

  /** Highest seq handed to onEvents (or queued for it) so far. */
  get seq(): number {
    return this.lastSeq;
  }

  start(): void {
    this.stopped = false;
    this.setState('connecting');
    this.connect();
  }

  /** Close for good: no reconnect, no further callbacks. */
  stop(): void {
    this.stopped = true;
    if (this.retryTimer !== null) clearTimeout(this.retryTimer);
    if (this.flushTimer !== null) clearTimeout(this.flushTimer);
    this.retryTimer = this.flushTimer = null;
    this.pending = [];
    const socket = this.socket;
    this.socket = null;
    if (socket) {
      socket.onopen = socket.onmessage = socket.onclose = socket.onerror = null;
      socket.close(1000);
    }
  }

  private connect(): void {
    const loc = this.opts.location ?? window.location;
    const url = jobStreamUrl(loc, this.opts.jobId, this.lastSeq, this.opts.replayKinds);
    const create = this.opts.createSocket ?? ((u: string) => new WebSocket(u) as unknown as SocketLike);
    const socket = create(url);
    this.socket = socket;
    this.gotMessage = false;
    socket.onopen = () => {
      this.openedAt = this.now();
      this.setState('live');
    };
    socket.onmessage = (ev) => {
      if (typeof ev.data !== 'string') return;
      const event = parseEventMessage(ev.data);
      if (!event) return;
      this.gotMessage = true;
      if (event.seq <= this.lastSeq) return; // already delivered before a reconnect
      this.lastSeq = event.seq;
      this.pending.push(event);
      if (this.flushTimer === null) {
        this.flushTimer = setTimeout(() => this.flush(), this.batchMs);
      }
    };
    // A failed socket always fires close after error; handle everything there.
    socket.onerror = () => {};
    socket.onclose = (ev) => this.handleClose(socket, ev.code);
  }

  private handleClose(socket: SocketLike, code: number): void {
    if (socket !== this.socket || this.stopped) return;
    this.socket = null;
    this.flush();
    if (code === CLOSE_UNAUTHENTICATED) return this.setState('unauthenticated');
    if (code === CLOSE_NOT_FOUND) return this.setState('not_found');
    if (this.opts.shouldReconnect && !this.opts.shouldReconnect()) return this.setState('ended');

    const healthy = this.openedAt > 0 && (this.gotMessage || this.now() - this.openedAt >= HEALTHY_AFTER_MS);
    if (healthy) this.attempt = 0;
    this.openedAt = 0;
    const delay = backoffDelayMs(this.attempt);
    this.attempt += 1;
    this.setState('reconnecting');
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      if (!this.stopped) this.connect();
    }, delay);
  }

  private flush(): void {
    if (this.flushTimer !== null) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    if (this.pending.length === 0 || this.stopped) return;
    const batch = this.pending;
    this.pending = [];
    this.opts.onEvents(batch);
  }

  private setState(state: StreamState): void {
    if (state === this.state) return;
    this.state = state;
    this.opts.onState(state);
  }
}
