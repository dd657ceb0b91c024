/**
 * Renderings of what ships, made by the real tools (scripts/tools.ts): `kubectl kustomize` for
 * every kustomization under manifests/, and `helm template` for the chart. The tests read these
 * objects, never the source YAML, so what they check is what `kubectl apply -k` and `helm install`
 * would send.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import assert from 'node:assert/strict';
import { parse } from 'yaml';
import { CHART, kustomize, MANIFESTS, parseObjects } from '../../scripts/render-install.js';
import { serveConfig } from '../../src/cli/serve-flags.js';
import type { Config } from '../../src/config/config.js';
import { ensureTools, run } from '../../scripts/tools.js';

export type Obj = Record<string, any>;

export const tools = await ensureTools();

/** Every directory under manifests/ with a kustomization.yaml, relative to manifests/ ('' is manifests/ itself), by kind. */
export function kustomizations(): { kustomizations: string[]; components: string[] } {
  const found = { kustomizations: [] as string[], components: [] as string[] };
  const walk = (dir: string): void => {
    const file = join(dir, 'kustomization.yaml');
    try {
      const kind = parse(readFileSync(file, 'utf8'))?.kind ?? 'Kustomization';
      (kind === 'Component' ? found.components : found.kustomizations).push(relative(MANIFESTS, dir));
    } catch {
      // No kustomization.yaml here: only its subfolders may hold one.
    }
    for (const name of readdirSync(dir)) if (statSync(join(dir, name)).isDirectory()) walk(join(dir, name));
  };
  walk(MANIFESTS);
  return found;
}

const cache = new Map<string, Obj[]>();

/** `kubectl kustomize manifests/<dir>` as objects. */
export function kustomizeObjects(dir = ''): Obj[] {
  const key = `k:${dir}`;
  if (!cache.has(key)) cache.set(key, parseObjects(kustomize(tools, join(MANIFESTS, dir))));
  return structuredClone(cache.get(key)!);
}

/**
 * A kustomization of the user's own (in a temporary directory) that builds on manifests/<resource>
 * and adds manifests/<component> (several: in that order): how docs/operating.md tells users to add a component.
 */
export function kustomizeWithComponent(resource: string, component: string | readonly string[]): Obj[] {
  const dir = mkdtempSync(join(tmpdir(), 'kustomization-'));
  try {
    // kustomize accepts only relative paths to other roots.
    const rel = (p: string): string => relative(dir, join(MANIFESTS, p));
    const components = (typeof component === 'string' ? [component] : component).map(rel);
    writeFileSync(join(dir, 'kustomization.yaml'), `resources: [${rel(resource)}]\ncomponents: [${components.join(', ')}]\n`);
    return parseObjects(kustomize(tools, dir));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export interface HelmOptions {
  readonly release?: string;
  readonly namespace?: string;
  /** --set key=value pairs. */
  readonly set?: Readonly<Record<string, string | number | boolean>>;
  /** A values file's content (YAML or JSON). */
  readonly values?: unknown;
}

/** The arguments after `helm template` for `opts`. */
export function helmArgs(opts: HelmOptions = {}): { args: string[]; cleanup: () => void } {
  const args = [opts.release ?? 'sidecar-injector', CHART, '--namespace', opts.namespace ?? 'sidecar-injector'];
  for (const [k, v] of Object.entries(opts.set ?? {})) args.push(typeof v === 'string' ? '--set-string' : '--set', `${k}=${v}`);
  if (opts.values === undefined) return { args, cleanup: () => {} };
  const dir = mkdtempSync(join(tmpdir(), 'helm-values-'));
  writeFileSync(join(dir, 'values.json'), JSON.stringify(opts.values));
  args.push('--values', join(dir, 'values.json'));
  return { args, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** `helm template` of the chart as objects; `extra`: more arguments (`--kube-version 1.29.0`). */
export function helmObjects(opts: HelmOptions = {}, extra: readonly string[] = []): Obj[] {
  const { args, cleanup } = helmArgs(opts);
  try {
    return parseObjects(run(tools, 'helm', ['template', ...args, ...extra]));
  } finally {
    cleanup();
  }
}

/** The error `helm template` fails with for `opts`, or undefined when it renders. */
export function helmError(opts: HelmOptions, extra: readonly string[] = []): string | undefined {
  try {
    helmObjects(opts, extra);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

/** The one object of a kind (and name, when given); fails the test when there is not exactly one. */
export function one(objects: readonly Obj[], kind: string, name?: string): Obj {
  const found = objects.filter((o) => o.kind === kind && (name === undefined || o.metadata?.name === name));
  if (found.length !== 1) throw new Error(`expected one ${kind}${name ? ` ${name}` : ''}, found ${found.length}`);
  return found[0]!;
}

/** The injector container of the Deployment. */
export const injector = (objects: readonly Obj[]): Obj => one(objects, 'Deployment').spec.template.spec.containers[0];

/** The server's configuration as the injector container starts it: its flags and its plain environment values. */
export function serverConfig(objects: readonly Obj[]): Config {
  const c = injector(objects);
  const env = Object.fromEntries((c.env as Obj[]).filter((e) => e.value !== undefined).map((e) => [e.name, e.value]));
  return serveConfig(c.args.slice(1), env);
}

/** Labels Helm charts conventionally add to every object's metadata (never to selectors or pod templates). */
const HELM_LABELS = ['helm.sh/chart', 'app.kubernetes.io/instance', 'app.kubernetes.io/version', 'app.kubernetes.io/managed-by'];

/** An object's kind, namespace and name, as one string. */
export const key = (o: Obj): string => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;

/** The object without the Helm-only metadata labels, so it can be compared with kustomize's. */
function withoutHelmLabels(o: Obj): Obj {
  const out = structuredClone(o);
  for (const label of HELM_LABELS) {
    assert.ok(out.metadata.labels?.[label] !== undefined, `${key(o)} carries ${label}`);
    delete out.metadata.labels[label];
  }
  return out;
}

/** Asserts that two renderings hold the same objects, compared one by one. */
export function assertSameObjects(helm: Obj[], kustomize: Obj[]): void {
  const fromHelm = new Map(helm.map((o) => [key(o), withoutHelmLabels(o)]));
  const fromKustomize = new Map(kustomize.map((o) => [key(o), o]));
  assert.deepEqual([...fromHelm.keys()].sort(), [...fromKustomize.keys()].sort(), 'the same objects');
  for (const [k, o] of fromKustomize) assert.deepEqual(fromHelm.get(k), o, k);
}

/**
 * The kustomize objects the chart templates: all but the SidecarTemplate CRD, which the chart ships
 * as is in crds/ (helm installs it first and never templates it), the same file as the base's
 * (`npm run schema` writes both; test/scripts/render-schema.test.ts checks them).
 */
export const templated = (objects: any[]): any[] => objects.filter((o) => o.kind !== 'CustomResourceDefinition');
