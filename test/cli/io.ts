import { Readable } from 'node:stream';
import type { IO } from '../../src/cli/args.js';

/** An IO that records what a command writes and feeds it `stdin`. */
export function captureIO(stdin = ''): IO & { out: () => string; err: () => string } {
  const out: string[] = [];
  const err: string[] = [];
  return {
    stdout: (t) => void out.push(t),
    stderr: (t) => void err.push(t),
    stdin: Readable.from([Buffer.from(stdin)]),
    out: () => out.join(''),
    err: () => err.join(''),
  };
}
