import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { JobEvent } from '../api/types';
import { backoffDelayMs, JobStream, jobStreamUrl, type SocketLike, type StreamState } from './jobStream';

class FakeSocket implements SocketLike {
  onopen: SocketLike['onopen'] = null;
  onmessage: SocketLike['onmessage'] = null;
  onclose: SocketLike['onclose'] = null;
  onerror: SocketLike['onerror'] = null;
  closedWith: number | null = null;
  constructor(readonly url: string) {}
  close(code?: number) {
    this.closedWith = code ?? 1000;
  }
  // What the server does:
  open() {
    this.onopen?.({});
  }
  send(seq: number) {
    const event = { seq, kind: 'log', created_at: '', data: { level: 'info', message: `e${seq}` } };
    this.onmessage?.({ data: JSON.stringify({ type: 'event', event }) });
  }
  drop(code = 1006) {
    this.onclose?.({ code });
  }
}

function setup(opts: { shouldReconnect?: () => boolean } = {}) {
  const sockets: FakeSocket[] = [];
  const received: JobEvent[] = [];
  const states: StreamState[] = [];
  const stream = new JobStream({
    jobId: 'j1',
    onEvents: (batch) => received.push(...batch),
    onState: (s) => states.push(s),
    createSocket: (url) => {
      const s = new FakeSocket(url);
      sockets.push(s);
      return s;
    },
    location: { protocol: 'http:', host: 'dash.test' },
    now: () => Date.now(),
    ...opts,
  });
  const last = () => sockets[sockets.length - 1]!;
  return { stream, sockets, received, states, last };
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('backoffDelayMs', () => {
  it('doubles from 1 s and stops at 10 s', () => {
    expect([0, 1, 2, 3, 4, 5, 20].map(backoffDelayMs)).toEqual([1000, 2000, 4000, 8000, 10000, 10000, 10000]);
  });
});

describe('jobStreamUrl', () => {
  it('uses ws: or wss: to match the page', () => {
    expect(jobStreamUrl({ protocol: 'http:', host: 'a:8000' }, 'id', 0)).toBe('ws://a:8000/ws/jobs/id/?after=0');
    expect(jobStreamUrl({ protocol: 'https:', host: 'a' }, 'id', 42)).toBe('wss://a/ws/jobs/id/?after=42');
  });

  it('asks for a replay of only some kinds when told to', () => {
    expect(jobStreamUrl({ protocol: 'http:', host: 'a' }, 'id', 0, ['status', 'log'])).toBe(
      'ws://a/ws/jobs/id/?after=0&replay=status,log',
    );
  });
});

describe('JobStream', () => {
  it('batches events and reports live', () => {
    const { stream, received, states, last } = setup();
    stream.start();
    last().open();
    last().send(1);
    last().send(2);
    expect(received).toHaveLength(0); // batched
    vi.advanceTimersByTime(100);
    expect(received.map((e) => e.seq)).toEqual([1, 2]);
    expect(states).toEqual(['connecting', 'live']);
  });

  it('reconnects after a drop with after=<last seq>, dropping anything already seen', () => {
    const { stream, sockets, received, states, last } = setup();
    stream.start();
    last().open();
    last().send(1);
    last().send(2);
    last().send(3);
    last().drop();
    expect(received.map((e) => e.seq)).toEqual([1, 2, 3]); // flushed on close
    expect(states[states.length - 1]).toBe('reconnecting');

    vi.advanceTimersByTime(999);
    expect(sockets).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(sockets).toHaveLength(2);
    expect(last().url).toBe('ws://dash.test/ws/jobs/j1/?after=3');

    last().open();
    last().send(3); // a server replaying one too many must not duplicate it
    last().send(4);
    vi.advanceTimersByTime(100);
    expect(received.map((e) => e.seq)).toEqual([1, 2, 3, 4]);
    expect(states[states.length - 1]).toBe('live');
  });

  it('backs off 1 s, 2 s, 4 s ... while attempts keep failing, and resets after a good connection', () => {
    const { stream, sockets, last } = setup();
    stream.start();
    const gaps: number[] = [];
    for (let i = 0; i < 6; i++) {
      last().drop(); // never opened
      const before = sockets.length;
      let waited = 0;
      while (sockets.length === before) {
        vi.advanceTimersByTime(100);
        waited += 100;
      }
      gaps.push(waited);
    }
    expect(gaps).toEqual([1000, 2000, 4000, 8000, 10000, 10000]);

    last().open();
    last().send(1); // a working connection
    last().drop();
    vi.advanceTimersByTime(1000);
    expect(sockets).toHaveLength(8);
  });

  it.each([
    [4401, 'unauthenticated'],
    [4404, 'not_found'],
  ] as const)('gives up on close code %i', (code, state) => {
    const { stream, sockets, states, last } = setup();
    stream.start();
    last().open();
    last().drop(code);
    vi.advanceTimersByTime(60_000);
    expect(sockets).toHaveLength(1);
    expect(states[states.length - 1]).toBe(state);
  });

  it('stops retrying once the page says the job is over', () => {
    let terminal = false;
    const { stream, sockets, states, last } = setup({ shouldReconnect: () => !terminal });
    stream.start();
    last().open();
    terminal = true;
    last().drop(1000);
    vi.advanceTimersByTime(60_000);
    expect(sockets).toHaveLength(1);
    expect(states[states.length - 1]).toBe('ended');
  });

  it('stop() closes the socket, cancels a pending retry and reports nothing more', () => {
    const { stream, sockets, received, states, last } = setup();
    stream.start();
    last().open();
    last().send(1);
    stream.stop();
    expect(sockets[0]!.closedWith).toBe(1000);
    vi.advanceTimersByTime(60_000);
    expect(received).toHaveLength(0);
    expect(sockets).toHaveLength(1);
    expect(states).toEqual(['connecting', 'live']);
  });
});
