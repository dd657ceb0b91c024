/** Escapes one JSON Pointer token (RFC 6901): `~` as `~0`, then `/` as `~1`. */
export function escapeToken(token: string): string {
  if (!token.includes('~') && !token.includes('/')) return token;
  return token.replace(/~/g, '~0').replace(/\//g, '~1');
}
