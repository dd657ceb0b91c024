/**
 * A memory limit for one benchmarked server, as its container has one: a memory cgroup of its own.
 *
 * Node sizes V8's heap from the memory it may use: `uv_get_constrained_memory()`, the cgroup's limit
 * where there is one, else the machine's. Under the Deployment's 256 MiB, V8's heap limit is about
 * 259 MB and the old generation grows by a small factor between mark-compacts; on a 24 GiB machine
 * without a limit, the heap limit is about 4 GB and the old generation may grow to 4 times what
 * lives. So the bench runs each server in a cgroup with the Deployment's limit, where the machine
 * lets it make one (root, a writable cgroup v1 memory hierarchy or cgroup v2 with the memory
 * controller), and says so in BENCHMARKS.md; elsewhere it runs them without and says that.
 */
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';

/** A cgroup made for one child process; `procs` is the file a process writes its pid into to join. */
export interface MemoryCgroup {
  readonly procs: string;
  /** Removes the cgroup once its process has exited. */
  remove(): void;
}

/** The memory limit of the injector's container in manifests/base/deployment.yaml, in bytes. */
export function deploymentMemoryLimit(deploymentYaml: string): number {
  const deployment = parse(deploymentYaml) as { spec: { template: { spec: { containers: { resources?: { limits?: { memory?: string } } }[] } } } };
  const quantity = deployment.spec.template.spec.containers[0]?.resources?.limits?.memory;
  if (quantity === undefined) throw new Error('the Deployment sets no memory limit');
  return bytesOf(quantity);
}

/** Bytes of a memory quantity written as the manifests write it: a number, optionally with Ki, Mi or Gi. */
export function bytesOf(quantity: string): number {
  const match = /^(\d+)(Ki|Mi|Gi)?$/.exec(quantity);
  if (match === null) throw new Error(`not a memory quantity in bytes, Ki, Mi or Gi: ${quantity}`);
  return Number(match[1]) * { '': 1, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30 }[match[2] ?? '']!;
}

/**
 * Makes a memory cgroup limited to `bytes` beside this process's own, or answers why it cannot: the
 * bench then runs the servers without a limit.
 */
export function makeMemoryCgroup(name: string, bytes: number): MemoryCgroup | string {
  const own = readFileSync('/proc/self/cgroup', 'utf8').split('\n');
  const v1 = own.map((line) => /^\d+:memory:(.*)$/.exec(line)?.[1]).find((path) => path !== undefined);
  const v2 = own.map((line) => /^0::(.*)$/.exec(line)?.[1]).find((path) => path !== undefined);
  const [dir, limitFile] =
    v1 !== undefined
      ? [join('/sys/fs/cgroup/memory', v1, name), 'memory.limit_in_bytes']
      : v2 !== undefined && existsSync('/sys/fs/cgroup/cgroup.controllers')
        ? [join('/sys/fs/cgroup', v2, name), 'memory.max']
        : [undefined, undefined];
  if (dir === undefined || limitFile === undefined) return 'no cgroup memory controller';
  try {
    mkdirSync(dir);
    writeFileSync(join(dir, limitFile), String(bytes));
  } catch (error) {
    try {
      rmdirSync(dir);
    } catch {
      // It was never made.
    }
    return `cannot make a memory cgroup: ${(error as Error).message}`;
  }
  return {
    procs: join(dir, 'cgroup.procs'),
    remove: () => rmdirSync(dir),
  };
}

/** The command that starts `argv` inside `cgroup`: a shell joins it, then replaces itself with `argv`, keeping its pid. */
export function inCgroup(cgroup: MemoryCgroup, argv: readonly string[]): [string, string[]] {
  return ['sh', ['-c', 'echo $$ > "$0" && exec "$@"', cgroup.procs, ...argv]];
}
