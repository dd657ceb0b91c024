import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** What `version` prints and the build-info metric carries. */
export interface BuildInfo {
  /** package.json `version`. */
  readonly version: string;
  /** The git commit `npm run build` stamped (src/build/stamp.ts); absent when run from source or built without git. */
  readonly commit?: string;
  /** The Node.js version running it. */
  readonly node: string;
}

/** Written by src/build/stamp.ts next to the compiled `src/` (dist/build-info.json). */
export const STAMP_FILE = 'build-info.json';

let cached: BuildInfo | undefined;

/** The version, the commit and the Node.js version, read once from package.json and the build stamp. */
export function buildInfo(): BuildInfo {
  cached ??= readBuildInfo(dirname(fileURLToPath(import.meta.url)));
  return cached;
}

function readBuildInfo(here: string): BuildInfo {
  const node = process.versions.node;
  const pkg = findUp(here, 'package.json');
  const version = pkg === undefined ? 'unknown' : String((JSON.parse(readFileSync(pkg, 'utf8')) as { version?: unknown }).version ?? 'unknown');
  // here is <root>/src/build from source, <root>/dist/src/build once compiled: the stamp sits two levels up.
  const stamp = join(here, '..', '..', STAMP_FILE);
  const commit = existsSync(stamp) ? (JSON.parse(readFileSync(stamp, 'utf8')) as { commit?: unknown }).commit : undefined;
  return { version, ...(typeof commit === 'string' && commit !== '' && { commit }), node };
}

function findUp(dir: string, name: string): string | undefined {
  for (let d = dir, i = 0; i < 5; d = dirname(d), i++) {
    if (existsSync(join(d, name))) return join(d, name);
  }
  return undefined;
}
