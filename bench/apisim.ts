/**
 * The load driver the kube-apiserver itself would be: `../shared/tools/apisim` (Go, net/http and
 * crypto/tls as the apiserver uses them, reviews encoded in the apiserver's field order, keep-alive
 * HTTP/1.1 over TLS, the answer verified as the apiserver verifies it). `npm run bench` uses it when
 * the APISIM environment variable names its binary:
 *
 *   APISIM=$(../shared/tools/apisim/build.sh) npm run bench
 *
 * The client runs on core 0 and the servers on core 1 (taskset), so the client never takes the
 * server's CPU; without APISIM the Node driver in bench/load.ts shares both cores with the servers.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

/** The apisim binary named by APISIM, when it exists. */
export function apisimBinary(): string | undefined {
  const path = process.env['APISIM'];
  return path !== undefined && path !== '' && existsSync(path) ? path : undefined;
}

/** The cores of a pinned run: the servers on one, the client on the other (a 2-core machine has no more). */
export const Cores = { server: '1', client: '0' } as const;

/** What one `apisim load` run printed (one JSON line). */
export interface ApisimResult {
  readonly ok: number;
  readonly errors: number;
  readonly firstError: string;
  readonly rps: number;
  readonly p50: number;
  readonly p99: number;
  readonly p999: number;
  /** Server CPU per review, µs (with --pid). */
  readonly cpuUsPerReq?: number;
}

export interface ApisimLoad {
  readonly binary: string;
  readonly port: number;
  /** The CA file that signed the server's certificate. */
  readonly caFile: string;
  /** The pod, as its JSON file. */
  readonly podFile: string;
  readonly pid: number;
  readonly connections: number;
  readonly seconds: number;
  /** Give every review its own pod name (a StatefulSet's pods), so no two reviews repeat. */
  readonly distinct: boolean;
  /** A fixed rate in reviews a second (steady), or closed loop. */
  readonly rate?: number;
  /** Count an answer without a patch as an error (the product must inject; the floor never does). */
  readonly expectPatch: boolean;
  /** Unmeasured seconds first (default 1). */
  readonly warmupSeconds?: number;
}

/** One measured run of `apisim load` against 127.0.0.1:port/mutate, the client pinned to its core. */
export async function apisimLoad(load: ApisimLoad): Promise<ApisimResult> {
  const args = [
    '-c',
    Cores.client,
    load.binary,
    'load',
    '--url',
    `https://localhost:${load.port}/mutate`,
    '--addr',
    `127.0.0.1:${load.port}`,
    '--ca',
    load.caFile,
    '--server-name',
    'localhost',
    '--object',
    load.podFile,
    '--namespace',
    'shop',
    '--conns',
    String(load.connections),
    '--duration',
    `${load.seconds}s`,
    '--warmup',
    `${load.warmupSeconds ?? 1}s`,
    '--pid',
    String(load.pid),
    ...(load.distinct ? ['--distinct'] : []),
    ...(load.rate !== undefined ? ['--rate', String(load.rate)] : []),
    ...(load.expectPatch ? ['--expect-patch'] : []),
  ];
  const { stdout } = await promisify(execFile)('taskset', args, { maxBuffer: 1 << 20 });
  const line = stdout.trim().split('\n').pop() ?? '';
  return JSON.parse(line) as ApisimResult;
}

/** Writes the CA and each pod where apisim reads them, once per run. */
export async function apisimFiles(
  dir: string,
  ca: string,
  pods: Readonly<Record<string, object>>,
): Promise<{ readonly caFile: string; readonly podFiles: Record<string, string> }> {
  const caFile = join(dir, 'ca.crt');
  await writeFile(caFile, ca);
  const podFiles: Record<string, string> = {};
  for (const [name, pod] of Object.entries(pods)) {
    podFiles[name] = join(dir, `pod-${name}.json`);
    await writeFile(podFiles[name], JSON.stringify(pod));
  }
  return { caFile, podFiles };
}
