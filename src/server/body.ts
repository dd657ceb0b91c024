import type { IncomingMessage } from 'node:http';
import getRawBody from 'raw-body';
import { InjectorError } from '../errors.js';

/** controller-runtime's limit: above the apiserver's own 3 MiB request limit, with room to spare. */
export const MAX_BODY_BYTES = 7 * 1024 * 1024;

/** Rejects anything but `application/json` (parameters such as charset are allowed). */
export function checkContentType(header: string | undefined): void {
  const type = (header ?? '').split(';', 1)[0]!.trim().toLowerCase();
  if (type !== 'application/json') throw new InjectorError('UNSUPPORTED_MEDIA_TYPE', [header ? JSON.stringify(header) : 'none']);
}

/** Reads a body within the size limit, mapping each failure to its 4xx. */
export async function readBody(req: IncomingMessage, limit = MAX_BODY_BYTES): Promise<string> {
  const text = await readText(req, limit);
  if (text.trim() === '') throw new InjectorError('BODY_EMPTY');
  return text;
}

/** Parses a body read by readBody; malformed JSON is a 400. */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new InjectorError('BODY_MALFORMED', [(err as Error).message], { cause: err });
  }
}

async function readText(req: IncomingMessage, limit: number): Promise<string> {
  const length = req.headers['content-length'];
  try {
    return await getRawBody(req, { limit, encoding: 'utf8', ...(length !== undefined && { length }) });
  } catch (err) {
    const type = (err as { type?: string }).type;
    if (type === 'entity.too.large') throw new InjectorError('BODY_TOO_LARGE', [limit], { cause: err });
    throw new InjectorError('BODY_ABORTED', [(err as Error).message], { cause: err });
  }
}
