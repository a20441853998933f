import openapiTS, { astToString, type OpenAPI3 } from 'openapi-typescript';
import { describe, expect, it } from 'vitest';
import schema from './openapi.json';
import committed from './schema.d.ts?raw';

/** The generator's own banner, which the CLI adds and the library does not. */
function withoutBanner(text: string): string {
  return text.replace(/^\/\*\*[\s\S]*?\*\/\s*/, '').trim();
}

describe('generated API types', () => {
  it('schema.d.ts is what openapi-typescript makes of openapi.json (run `make api-types`)', async () => {
    const generated = astToString(await openapiTS(schema as unknown as OpenAPI3));
    expect(withoutBanner(committed)).toBe(withoutBanner(generated));
  });
});
