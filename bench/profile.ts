/**
 * Summarizes `.cpuprofile` files (from `npm run bench -- --profile`): self time by function and by
 * package, so the costly parts of a review stand out without a flame-graph viewer.
 *
 * Usage: node --import tsx bench/profile.ts bench/profiles [top]
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly children?: readonly number[];
}

interface Profile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

const [where = 'bench/profiles', topArg = '30'] = process.argv.slice(2);
const files = statSync(where).isDirectory()
  ? readdirSync(where)
      .filter((f) => f.endsWith('.cpuprofile'))
      .map((f) => join(where, f))
  : [where];

const byFunction = new Map<string, number>();
const inclusive = new Map<string, number>();
const byPackage = new Map<string, number>();
let total = 0;
for (const file of files) {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  profile.samples.forEach((id, i) => {
    const n = nodes.get(id)!;
    const micros = profile.timeDeltas[i] ?? 0;
    const { functionName, url, lineNumber } = n.callFrame;
    const short = url.replace(/^file:\/\/.*?\/(node_modules|dist)\//, '$1/');
    add(byFunction, `${functionName || '(anonymous)'} ${short}:${lineNumber + 1}`, micros);
    add(byPackage, packageOf(url, functionName), micros);
    total += micros;
    // Inclusive time: each function on the sampled stack once, however often it recurses.
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const f = nodes.get(at)!.callFrame;
      const key = `${f.functionName || '(anonymous)'} ${f.url.replace(/^file:\/\/.*?\/(node_modules|dist)\//, '$1/')}:${f.lineNumber + 1}`;
      if (!seen.has(key)) add(inclusive, key, micros);
      seen.add(key);
    }
  });
}

function packageOf(url: string, fn: string): string {
  if (url === '') return `(${fn || 'native'})`;
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) return m[1]!;
  if (url.startsWith('node:')) return url.split('/')[0]!;
  const d = /\/dist\/(src\/[^/]+)/.exec(url);
  return d ? d[1]! : url;
}

function add(map: Map<string, number>, key: string, v: number): void {
  map.set(key, (map.get(key) ?? 0) + v);
}

function print(title: string, map: Map<string, number>, top: number): void {
  process.stdout.write(`\n${title}\n`);
  for (const [k, v] of [...map].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    process.stdout.write(`${((100 * v) / total).toFixed(1).padStart(5)}%  ${(v / 1000).toFixed(0).padStart(6)} ms  ${k}\n`);
  }
}

process.stdout.write(`${files.length} profile(s), ${(total / 1e6).toFixed(2)} s sampled\n`);
print('self time by package / source folder', byPackage, 25);
print('self time by function', byFunction, Number(topArg));
print('total time (self + callees) by function', inclusive, Number(topArg));
