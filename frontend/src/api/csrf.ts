/** Value of one cookie from a `document.cookie` string, or '' when absent. */
export function readCookie(cookieString: string, name: string): string {
  for (const part of cookieString.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name) {
      try {
        return decodeURIComponent(part.slice(eq + 1).trim());
      } catch {
        return part.slice(eq + 1).trim();
      }
    }
  }
  return '';
}

/** Django's CSRF token, which every mutating request must echo in X-CSRFToken. */
export function csrfToken(): string {
  return typeof document === 'undefined' ? '' : readCookie(document.cookie, 'csrftoken');
}

/**
 * A random UUID v4 for the Idempotency-Key header. crypto.randomUUID only exists in
 * secure contexts (https or localhost); a dashboard opened over plain http on a LAN
 * address still has crypto.getRandomValues, so build the UUID from that.
 */
export function newIdempotencyKey(cryptoImpl: Crypto = globalThis.crypto): string {
  if (typeof cryptoImpl.randomUUID === 'function') return cryptoImpl.randomUUID();
  const bytes = cryptoImpl.getRandomValues(new Uint8Array(16));
  bytes[6] = (bytes[6]! & 0x0f) | 0x40; // version 4
  bytes[8] = (bytes[8]! & 0x3f) | 0x80; // RFC 4122 variant
  const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
