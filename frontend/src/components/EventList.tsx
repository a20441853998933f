import { memo, useLayoutEffect, useRef, useState } from 'react';
import type { JobEvent } from '../api/types';
import { formatClock, formatValue } from '../format';

type Kind = JobEvent['kind'];
const KINDS: Kind[] = ['status', 'log', 'metrics'];

/** One line of text for an event. */
export function describeEvent(event: JobEvent): string {
  switch (event.kind) {
    case 'status':
      return event.data.reason ? `${event.data.status} — ${event.data.reason}` : event.data.status;
    case 'log':
      return event.data.message;
    case 'metrics': {
      const parts = Object.entries(event.data.metrics ?? {}).map(
        ([name, value]) => `${name}=${typeof value === 'number' ? formatValue(value) : String(value)}`,
      );
      return `step ${event.data.step}: ${parts.join(', ')}`;
    }
  }
}

function levelOf(event: JobEvent): string {
  return event.kind === 'log' ? String(event.data.level ?? '').toLowerCase() : '';
}

/**
 * The job's events, oldest first, in a scrolling box that follows new rows while the
 * reader is at the bottom and stays put while they are reading further up.
 */
export function EventList({ events }: { events: readonly JobEvent[] }) {
  const [shown, setShown] = useState<Record<Kind, boolean>>({ status: true, log: true, metrics: true });
  const boxRef = useRef<HTMLDivElement>(null);
  const stickToBottom = useRef(true);
  const visible = events.filter((e) => shown[e.kind]);

  useLayoutEffect(() => {
    const box = boxRef.current;
    if (box && stickToBottom.current) box.scrollTop = box.scrollHeight;
  }, [visible.length, events]);

  const onScroll = () => {
    const box = boxRef.current;
    if (box) stickToBottom.current = box.scrollHeight - box.scrollTop - box.clientHeight < 24;
  };

  return (
    <section className="events" aria-labelledby="events-title">
      <div className="section-head">
        <h2 id="events-title">Events</h2>
        <fieldset className="event-filter">
          <legend className="visually-hidden">Show event kinds</legend>
          {KINDS.map((kind) => (
            <label key={kind}>
              <input
                type="checkbox"
                checked={shown[kind]}
                onChange={(e) => setShown((s) => ({ ...s, [kind]: e.target.checked }))}
              />
              {kind}
            </label>
          ))}
        </fieldset>
      </div>
      {/* tabIndex so keyboard users can scroll the box */}
      <div className="events-box" ref={boxRef} onScroll={onScroll} tabIndex={0} aria-label="Event log">
        {visible.length === 0 ? (
          <p className="muted events-empty">No events yet.</p>
        ) : (
          <table className="events-table">
            <thead className="visually-hidden">
              <tr>
                <th scope="col">Seq</th>
                <th scope="col">Time</th>
                <th scope="col">Kind</th>
                <th scope="col">Detail</th>
              </tr>
            </thead>
            <tbody>
              {visible.map((event) => (
                <EventRow key={event.seq} event={event} />
              ))}
            </tbody>
          </table>
        )}
      </div>
    </section>
  );
}

/**
 * One row, rendered once: a live run appends an event many times a second, and formatting
 * every kept row's sixty metric values again each time took the page below 10 frames a second.
 */
const EventRow = memo(function EventRow({ event }: { event: JobEvent }) {
  const level = levelOf(event);
  return (
    <tr
      data-testid="event-row"
      data-seq={event.seq}
      data-kind={event.kind}
      className={`event event-${event.kind} ${level ? `level-${level}` : ''}`}
    >
      <td className="event-seq">{event.seq}</td>
      <td className="event-time" title={event.created_at}>
        {formatClock(event.created_at)}
      </td>
      <td className="event-kind">{event.kind === 'log' ? level || 'log' : event.kind}</td>
      <td className="event-text">{describeEvent(event)}</td>
    </tr>
  );
});
