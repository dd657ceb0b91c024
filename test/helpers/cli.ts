import assert from 'node:assert/strict';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import type { IO } from '../../src/cli/args.js';
import { runCli } from '../../src/cli/program.js';

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

/** What one command line gave: its exit status and what it wrote. */
export interface CliResult {
  readonly code: number;
  readonly out: string;
  readonly err: string;
}

/** Runs a command line in-process, through the same parser as the installed binary. */
export async function cli(args: readonly string[], stdin = ''): Promise<CliResult> {
  const io = captureIO(stdin);
  const code = await runCli(args, io);
  return { code, out: io.out(), err: io.err() };
}

/** node's arguments that run the real binary from source (`node --import tsx src/cli/index.ts ...`), for tests that spawn it. */
export const CLI_ENTRY: readonly string[] = ['--import', 'tsx', 'src/cli/index.ts'];

const GOLDEN = 'test/fixtures/cli/golden';

/**
 * Compares what a command printed with `test/fixtures/cli/golden/<name>`, or rewrites that file
 * (and its folder) when REFRESH_GOLDEN=true after an intended change (Istio's convention).
 */
export async function golden(name: string, actual: string): Promise<void> {
  const file = join(GOLDEN, name);
  if (process.env['REFRESH_GOLDEN'] === 'true') {
    await mkdir(dirname(file), { recursive: true });
    await writeFile(file, actual);
  }
  assert.equal(actual, await readFile(file, 'utf8'), `${file} differs; REFRESH_GOLDEN=true npm test rewrites it after an intended change`);
}
