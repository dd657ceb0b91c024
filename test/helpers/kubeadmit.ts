import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

/**
 * kubeadmit (../shared/tools/kubeadmit): one pod CREATE through the kube-apiserver's own admission
 * code (k8s.io/apiserver's webhook plugins, chained and reinvoked as the apiserver does) against
 * webhook configurations and a running server. The tests find its binary without building it: the
 * KUBEADMIT environment variable, else the build script's cache (~/.cache/kubeadmit/kubeadmit).
 */
export const KUBEADMIT_CACHE = join(homedir(), '.cache', 'kubeadmit', 'kubeadmit');

/** The binary, or the one line a skipped suite prints: why, and how to enable it. */
export function findKubeadmit(): { binary: string } | { skip: string } {
  const named = process.env['KUBEADMIT'];
  if (named !== undefined && named !== '') {
    return existsSync(named)
      ? { binary: named }
      : { skip: `KUBEADMIT=${named} does not exist; point it at the binary ../shared/tools/kubeadmit/build.sh prints` };
  }
  if (existsSync(KUBEADMIT_CACHE)) return { binary: KUBEADMIT_CACHE };
  return {
    skip: `kubeadmit not found (KUBEADMIT unset, no ${KUBEADMIT_CACHE}); on Debian run ../shared/tools/kubeadmit/build.sh once, or set KUBEADMIT to its binary`,
  };
}

/** The scenario kubeadmit reads (apisim's format). */
export interface Scenario {
  readonly namespace: string;
  readonly namespaces?: Readonly<Record<string, { readonly labels: Readonly<Record<string, string>> }>>;
  readonly dryRun?: boolean;
  readonly object: object;
  readonly interlopers?: readonly { readonly patch: readonly object[]; readonly everyRound?: boolean }[];
}

/** One webhook request as kubeadmit saw it go over the wire. */
export interface Call {
  readonly mutating: boolean;
  readonly interloper?: boolean;
  readonly path: string;
  readonly version: string;
  readonly httpStatus: number;
  readonly allowed: boolean;
  readonly patchOps: number;
  readonly warnings?: string[];
  readonly error?: string;
}

/** What kubeadmit printed: the outcome a kubectl user sees, and the pod the apiserver would store. */
export interface Admission {
  readonly allowed: boolean;
  /** The error text kubectl prints after "Error from server" (with the pod's name, as the apiserver words it). */
  readonly reason?: string;
  readonly code?: number;
  readonly stage?: 'mutating' | 'validation' | 'validating' | 'decode';
  readonly warnings?: string[];
  readonly auditAnnotations?: Record<string, string>;
  readonly validationErrors?: string[];
  readonly calls: Call[];
  readonly object?: any;
}

export interface KubeadmitRun {
  readonly binary: string;
  /** Files of webhook configurations (kubeadmit's --config, repeated). */
  readonly configs: readonly string[];
  /** Where every webhook Service resolves to. */
  readonly addr: string;
  /** The CA file for empty caBundles. */
  readonly ca: string;
  /** Overrides every webhook's timeoutSeconds (kubeadmit's --timeout, e.g. "1s"). */
  readonly timeout?: string;
}

/**
 * Runs one scenario through kubeadmit. Its admission policy plugins answer "not yet ready" until
 * their informers have synced, which a loaded machine can delay past kubeadmit's own wait; an
 * apiserver serves only once synced, so the scenario is asked again then.
 */
export async function kubeadmit(run: KubeadmitRun, scenario: Scenario): Promise<Admission> {
  const res = await kubeadmitOnce(run, scenario);
  return res.reason?.endsWith('not yet ready to handle request') === true ? kubeadmitOnce(run, scenario) : res;
}

async function kubeadmitOnce(run: KubeadmitRun, scenario: Scenario): Promise<Admission> {
  const dir = await mkdtemp(join(tmpdir(), 'kubeadmit-'));
  try {
    const file = join(dir, 'scenario.json');
    await writeFile(file, JSON.stringify(scenario));
    const args = ['--scenario', file, '--addr', run.addr, '--ca', run.ca, ...run.configs.flatMap((c) => ['--config', c])];
    if (run.timeout !== undefined) args.push('--timeout', run.timeout);
    const { stdout } = await promisify(execFile)(run.binary, args, { maxBuffer: 64 * 1024 * 1024 });
    return JSON.parse(stdout) as Admission;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * `fn` over `items`, `limit` at a time, results in order. A kubeadmit run spends most of its half
 * second waiting (its informers' first sync), not on the CPU, so runs side by side save most of it.
 */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}
