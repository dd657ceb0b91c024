import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { createServer } from 'node:net';
import { connect } from 'node:tls';
import { inCgroup, type MemoryCgroup } from './cgroup.js';

/** A server under test, running in a child process of its own. */
export interface ServerProcess {
  readonly name: string;
  readonly child: ChildProcess;
  readonly port: number;
  /** Milliseconds from spawn until it answered its readiness check. */
  readonly readyMs: number;
  stop(): Promise<void>;
}

/** CPU time the kernel has charged to a process (all its threads: main, libuv pool, GC), in microseconds. */
export function cpuMicros(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name, which is in parentheses and may hold spaces: state is field 3.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]); // utime (14) + stime (15)
  return (ticks * 1e6) / CLOCK_TICKS;
}

// sysconf(_SC_CLK_TCK) is 100 on every Linux architecture Node supports.
const CLOCK_TICKS = 100;

/** Peak and current resident memory of a process, in bytes (VmHWM, VmRSS). */
export function memory(pid: number): { readonly peak: number; readonly current: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (key: string): number => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
  return { peak: kb('VmHWM'), current: kb('VmRSS') };
}

/** A free TCP port on the loopback interface. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/**
 * Spawns `node args...` and waits until `isReady` resolves true (polled every 2 ms, 10 s at most).
 * With `core`, the server runs on that core alone (taskset execs node, so the pid is node's); with
 * `cgroup`, inside that memory cgroup, which is removed when the server exits.
 */
export async function startServer(
  name: string,
  args: readonly string[],
  port: number,
  isReady: () => Promise<boolean>,
  place: { readonly core?: string; readonly cgroup?: MemoryCgroup } = {},
): Promise<ServerProcess> {
  const started = performance.now();
  const pinned = place.core === undefined ? [process.execPath, ...args] : ['taskset', '-c', place.core, process.execPath, ...args];
  const [command, argv] = place.cgroup === undefined ? [pinned[0]!, pinned.slice(1)] : inCgroup(place.cgroup, pinned);
  const child = spawn(command, argv, { stdio: ['ignore', 'pipe', 'inherit'], env: cleanEnv() });
  // The product logs one JSON line per review; a pipe that is read, as a container runtime reads it.
  child.stdout?.resume();
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  if (place.cgroup !== undefined) {
    const { cgroup } = place;
    child.once('exit', () => {
      try {
        cgroup.remove();
      } catch {
        // Left behind, empty: it limits nothing.
      }
    });
  }
  let early: Error | undefined;
  child.once('exit', (code) => (early ??= new Error(`${name} exited early with code ${code}`)));
  for (;;) {
    if (early) throw early;
    if (await isReady().catch(() => false)) break;
    if (performance.now() - started > 10_000) throw new Error(`${name} was not ready within 10 s`);
    await new Promise((r) => setTimeout(r, 2));
  }
  const readyMs = performance.now() - started;
  return {
    name,
    child,
    port,
    readyMs,
    async stop() {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

function cleanEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SIDECAR_INJECTOR_') && k !== 'NODE_OPTIONS'));
}

/** True when GET http://127.0.0.1:port/path answers 200. */
export function httpOk(port: number, path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path, timeout: 500, agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('error', () => resolve(false));
    req.end();
  });
}

/** True when a TLS handshake with 127.0.0.1:port succeeds against `ca`. */
export function tlsOk(port: number, ca: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port, ca, servername: 'localhost' }, () => {
      s.destroy();
      resolve(true);
    });
    s.on('error', () => resolve(false));
  });
}

/**
 * The node flags the container image starts the product with: those between node and the script in
 * the Dockerfile's ENTRYPOINT, so the benchmark measures the product as it ships.
 */
export function imageNodeFlags(dockerfile: string): string[] {
  const line = dockerfile.split('\n').find((l) => l.startsWith('ENTRYPOINT '));
  if (line === undefined) throw new Error('the Dockerfile has no ENTRYPOINT');
  const argv = JSON.parse(line.slice('ENTRYPOINT '.length)) as string[];
  return argv.slice(1, -1);
}
