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
