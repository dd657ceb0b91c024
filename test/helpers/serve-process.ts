import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { CLI_ENTRY } from './cli.js';

/** The flags that put `serve` on free ports of 127.0.0.1 (the health port too). */
export const LOOPBACK_FLAGS: readonly string[] = ['--port', '0', '--health-port', '0', '--host', '127.0.0.1'];

/** A `sidecar-injector serve` running as a child process, so its memory and its signals are its own. */
export interface ServeProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  /** The review port it logged. */
  readonly port: number;
  /** The health port it logged. */
  readonly healthPort: number;
  /** https://127.0.0.1:PORT */
  readonly url: string;
  /** http://127.0.0.1:HEALTHPORT */
  readonly healthUrl: string;
  /** Its log lines as they come, each parsed from JSON (the last `keepLogs` of them). */
  readonly logs: readonly any[];
  /** The lines of its standard output that were not JSON (a SIGKILL can cut the last one short). */
  readonly notJson: readonly string[];
  /** Kept with the exit code once the process is gone (null when a signal ended it). */
  readonly exited: Promise<number | null>;
  /** Resolves once /readyz answers 200, with the milliseconds it took; rejects after `timeoutMs`, or at once if the process died. */
  ready(timeoutMs?: number): Promise<number>;
  /** SIGKILL, unless it is already gone, and resolves once it is. */
  kill(): Promise<void>;
}

export interface ServeProcessOptions {
  /** node's own flags, before the script (the image's ENTRYPOINT sets some). */
  readonly nodeFlags?: readonly string[];
  /** Keep only the last this many log lines (a long run logs a line per review). */
  readonly keepLogs?: number;
  /** Called with the child as soon as it is spawned, to watch it while it starts. */
  readonly onSpawn?: (child: ChildProcess) => void;
}

/**
 * Spawns the real binary from source (`node --import tsx src/cli/index.ts serve`) on LOOPBACK_FLAGS
 * followed by `flags`, its standard error passed through, and resolves once it logs the ports it
 * serves on; rejects if it exits first.
 */
export async function startServeProcess(flags: readonly string[], options: ServeProcessOptions = {}): Promise<ServeProcess> {
  const child = spawn(process.execPath, [...(options.nodeFlags ?? []), ...CLI_ENTRY, 'serve', ...LOOPBACK_FLAGS, ...flags], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  options.onSpawn?.(child);
  const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
  const logs: any[] = [];
  const notJson: string[] = [];
  const keep = options.keepLogs ?? Infinity;
  const ports = await new Promise<{ port: number; healthPort: number }>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const log = parseLine(line);
      if (log === undefined) return void notJson.push(line);
      logs.push(log);
      if (logs.length > keep) logs.shift();
      if (typeof log.port === 'number' && typeof log.healthPort === 'number') resolve(log);
    });
    child.once('close', (code, signal) => reject(new Error(`sidecar-injector serve exited (${signal ?? code}) before serving`)));
  });
  return {
    child,
    pid: child.pid!,
    ...ports,
    url: `https://127.0.0.1:${ports.port}`,
    healthUrl: `http://127.0.0.1:${ports.healthPort}`,
    logs,
    notJson,
    exited,
    ready: (timeoutMs = 10_000) => ready(child, `http://127.0.0.1:${ports.healthPort}/readyz`, timeoutMs),
    async kill() {
      if (!gone(child)) child.kill('SIGKILL');
      await exited;
    },
  };
}

const gone = (child: ChildProcess): boolean => child.exitCode !== null || child.signalCode !== null;

/** The log line as an object, or undefined when it is not a JSON object. */
function parseLine(line: string): any {
  try {
    const log = JSON.parse(line);
    return typeof log === 'object' && log !== null ? log : undefined;
  } catch {
    return undefined;
  }
}

async function ready(child: ChildProcess, readyz: string, timeoutMs: number): Promise<number> {
  const start = Date.now();
  for (;;) {
    if (gone(child)) throw new Error(`sidecar-injector serve died (${child.signalCode ?? child.exitCode}) before it was ready`);
    try {
      if ((await fetch(readyz)).status === 200) return Date.now() - start;
    } catch {
      // not listening yet
    }
    if (Date.now() - start > timeoutMs) throw new Error(`not ready within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
