import { imageRepository, parseImage } from '../../src/kube-values/image.js';

/**
 * An executable model of the injection rules in docs/templates.md ("How injection is decided", "Jobs complete",
 * "Placeholders", "Fields beyond the basics", "Per-pod overrides", "Templates used together"),
 * written from that documentation and the Kubernetes rules it cites, not from src/inject: what /mutate must
 * make of a pod CREATE, as the pod the apiserver stores, or which refusal. test/inject/mutate.model.test.ts
 * holds the product's answer (the handler's patch, applied the evanphx/json-patch v4 way) to it.
 *
 * It reads the SidecarTemplate documents as written (not the loader's compiled form) and works on
 * whole pods, copying freely: plain loops, no plans, no shared lists, no caches. It shares two
 * things with the product, neither of which decides an injection: the image grammar
 * (src/kube-values/image.ts, table-tested against distribution/reference on its own), for the validity of
 * an image override and the repository in the status record; and the template versions, digests
 * that the loader computes (`TemplateDoc.version`).
 *
 * Where the documentation is silent the model takes the reading a Kubernetes user would, and says so below:
 * placeholders read the pod as it will be stored (its labels and annotations plus those the
 * templates add), because a re-invocation must render alike; a mount is also skipped when its path
 * is already mounted in that container (core/v1 refuses a mountPath twice); a port name shared by two
 * templates is no conflict (Kubernetes only warns of it; see the corpus's fluent-bit with oauth2-proxy).
 * Not modelled: warnings, and the 256 KiB annotation limit (ANNOTATIONS_TOO_LARGE).
 */

type Obj = Record<string, any>;

/** A SidecarTemplate as the loader read it from its file. */
export interface TemplateDoc {
  readonly name: string;
  /** The loader's version of it (a digest of the source: an identity, not a decision). */
  readonly version: string;
  readonly spec: Obj;
}

/** What /mutate must answer. */
export type Expected =
  /** Left alone: not opted in, or no template to inject. */
  | { readonly outcome: 'skipped' }
  | { readonly outcome: 'denied'; readonly reason: 'unknown-template' | 'template-conflict' | 'override-refused' | 'volume-missing' | 'template-value-invalid' }
  | { readonly outcome: 'injected'; readonly pod: Obj };

const INJECT = 'sidecar-injector.io/inject';
const TEMPLATES = 'sidecar-injector.io/templates';
const STATUS = 'sidecar-injector.io/status';

class Denial extends Error {
  constructor(readonly reason: 'unknown-template' | 'template-conflict' | 'override-refused' | 'volume-missing' | 'template-value-invalid') {
    super(reason);
  }
}

/** `spec.required` takes the namespace: present, and its namespaceSelector (on the name label alone) holds. */
function requiredIn(required: unknown, namespace: string): boolean {
  if (typeof required !== 'object' || required === null) return false;
  const selector = (
    required as { namespaceSelector?: { matchLabels?: Record<string, string>; matchExpressions?: { key: string; operator: string; values?: string[] }[] } }
  ).namespaceSelector;
  const labels: Record<string, string> = { 'kubernetes.io/metadata.name': namespace };
  const holds = (r: { key: string; operator: string; values?: string[] }): boolean => {
    const value = labels[r.key];
    if (r.operator === 'In') return value !== undefined && (r.values ?? []).includes(value);
    if (r.operator === 'NotIn') return value === undefined || !(r.values ?? []).includes(value);
    return (r.operator === 'Exists') === (value !== undefined);
  };
  return Object.entries(selector?.matchLabels ?? {}).every(([k, v]) => labels[k] === v) && (selector?.matchExpressions ?? []).every(holds);
}

/** What /mutate must do with `pod`, created in `namespace`, under the template set `set` (in the loader's order). */
export function expectedInjection(pod: Obj, set: readonly TemplateDoc[], namespace: string): Expected {
  const meta = pod['metadata'] ?? {};
  // 2. Only the label "true" opts a pod in (on /mutate, the pod scope).
  if (ownValue(meta.labels, INJECT) !== 'true') return { outcome: 'skipped' };
  // 3. The annotation names the templates, in order; without it (or empty) the defaults apply.
  const names = [
    ...new Set(
      String(ownValue(meta.annotations, TEMPLATES) ?? '')
        .split(',')
        .map((n) => n.trim())
        .filter((n) => n !== ''),
    ),
  ];
  const byName = new Map(set.map((t) => [t.name, t]));
  if (names.some((n) => !byName.has(n))) return { outcome: 'denied', reason: 'unknown-template' };
  const chosen = names.length > 0 ? names.map((n) => byName.get(n)!) : set.filter((t) => t.spec['default'] === true);
  // Then every required template of the namespace they lack, in name order (Required templates).
  const required = set.filter((t) => requiredIn(t.spec['required'], namespace) && !chosen.includes(t)).sort((a, b) => (a.name < b.name ? -1 : 1));
  const selected = [...chosen, ...required];
  if (selected.length === 0) return { outcome: 'skipped' };
  try {
    return { outcome: 'injected', pod: inject(pod, selected, namespace) };
  } catch (err) {
    if (err instanceof Denial) return { outcome: 'denied', reason: err.reason };
    throw err;
  }
}

/** One selected template, rendered for the pod: what it puts in. */
interface Part {
  readonly name: string;
  readonly version: string;
  readonly native: boolean;
  readonly placement: unknown;
  /** Its containers, native ones carrying restartPolicy: Always. */
  readonly containers: Obj[];
  readonly initContainers: Obj[];
  readonly volumes: Obj[];
  readonly imagePullSecrets: Obj[];
  readonly volumeMounts: Obj[];
  readonly env: Obj[];
  readonly annotations: Obj;
  readonly labels: Obj;
}

function inject(pod: Obj, selected: readonly TemplateDoc[], namespace: string): Obj {
  const out = structuredClone(pod);
  out.metadata ??= {};
  out.spec ??= {};
  const meta = out.metadata;
  const spec = out.spec;
  // "Jobs complete": a pod whose ownerReferences name a batch Job (a CronJob's pods are a Job's).
  const job = (meta.ownerReferences ?? []).some((o: Obj) => o['kind'] === 'Job' && String(o['apiVersion']).startsWith('batch/'));

  const stored = storedMaps(meta, selected, namespace, spec);
  const parts = selected.map((t) => part(t, { namespace, meta, spec, stored }, job));
  // 5. A rendered value the apiserver would refuse where it lands denies the pod (issue 21). The
  // generated templates hold placeholders in label values, env values, args and annotations, and
  // only label values have a rule (validation.IsValidLabelValue). A label value that loses to the
  // pod's own or an earlier template's (4.) never lands.
  const landing = new Set(Object.keys(meta.labels ?? {}));
  for (const p of parts) {
    for (const [key, value] of Object.entries(p.labels)) {
      if (!landing.has(key) && !isLabelValue(String(value))) throw new Denial('template-value-invalid');
      landing.add(key);
    }
  }
  overrideAll(parts, selected, stored.annotations);
  checkConflicts(parts);

  const sidecarNames = new Set(parts.flatMap((p) => p.containers.map((c) => c.name)));
  const taken = new Set([...(spec.initContainers ?? []), ...(spec.containers ?? [])].map((c: Obj) => c.name));
  const added: Obj[] = [];
  const inits: Entry[] = (spec.initContainers ?? []).map((c: Obj) => ({ item: c, own: true, first: false }));
  const containers: Entry[] = (spec.containers ?? []).map((c: Obj) => ({ item: c, own: true, first: false }));
  for (const p of parts) {
    // A template's init containers run ahead of the pod's own, in template order.
    for (const c of p.initContainers) if (addName(taken, c.name)) place(inits, c, 'first', added);
    // Containers go where the template's placement says; native sidecars into initContainers, first by default.
    for (const c of p.containers) if (addName(taken, c.name)) place(p.native ? inits : containers, c, p.placement ?? (p.native ? 'first' : 'last'), added);
  }
  // The application containers (the pod's own, but for an earlier injection's sidecars) get the env and mounts.
  const extended = containers.map((e) => (e.own && !sidecarNames.has(e.item.name) ? withAppItems(e.item, parts, added) : e.item));
  spec.containers = extended;
  if (inits.length > 0) spec.initContainers = inits.map((e) => e.item);
  const volumes = appendNamed(
    spec.volumes,
    parts.flatMap((p) => p.volumes),
  );
  if (volumes !== undefined) spec.volumes = volumes;
  const secrets = appendNamed(
    spec.imagePullSecrets,
    parts.flatMap((p) => p.imagePullSecrets),
  );
  if (secrets !== undefined) spec.imagePullSecrets = secrets;

  // 5. A mount the injection adds must name a volume of the finished pod.
  const volumeNames = new Set((spec.volumes ?? []).map((v: Obj) => v.name));
  if (added.some((c) => (c.volumeMounts ?? []).some((m: Obj) => !volumeNames.has(m.name)))) throw new Denial('volume-missing');

  // 4. The pod's labels and annotations win, then the first template's.
  const labels = addKeys(
    meta.labels,
    parts.map((p) => p.labels),
  );
  if (labels !== undefined) meta.labels = labels;
  meta.annotations = addKeys(
    meta.annotations,
    parts.map((p) => p.annotations),
  ) ?? { ...meta.annotations };
  // 6. The status, replacing any value the pod came with.
  meta.annotations[STATUS] = statusOf(parts);
  return out;
}

/** An item of a container list while sidecars are placed: the pod's own, or one added (placed `first`, or not). */
interface Entry {
  readonly item: Obj;
  readonly own: boolean;
  readonly first: boolean;
}

/**
 * "Fields beyond the basics": `first` puts the sidecar at the head of the list, after the sidecars
 * placed `first` before it (template order is kept); `last` at the end; `{before: X}`/`{after: X}`
 * next to the container X of the list as it stands (the pod's, or a sidecar placed earlier), and at
 * the end when there is no X. The pod's own containers are never moved.
 */
function place(list: Entry[], c: Obj, placement: unknown, added: Obj[]): void {
  added.push(c);
  const entry = { item: c, own: false, first: placement === 'first' };
  if (placement === 'first') {
    let at = 0;
    list.forEach((e, i) => {
      if (!e.own && e.first) at = i + 1;
    });
    list.splice(at, 0, entry);
    return;
  }
  const anchor = typeof placement === 'object' && placement !== null ? (placement as Obj) : {};
  const name = anchor['before'] ?? anchor['after'];
  const i = name === undefined ? -1 : list.findIndex((e) => e.item.name === name);
  if (i < 0) list.push(entry);
  else list.splice('before' in anchor ? i : i + 1, 0, entry);
}

/** An application container with the templates' env vars and mounts it lacks (by name; a mount by name or path). */
function withAppItems(c: Obj, parts: readonly Part[], added: Obj[]): Obj {
  const env = parts.flatMap((p) => p.env).filter((e, i, all) => all.findIndex((x) => x.name === e.name) === i);
  const mounts = parts.flatMap((p) => p.volumeMounts);
  const newEnv = env.filter((e) => !(c.env ?? []).some((x: Obj) => x.name === e.name));
  const newMounts: Obj[] = [];
  for (const m of mounts) {
    const has = [...(c.volumeMounts ?? []), ...newMounts].some((x: Obj) => x.name === m.name || x.mountPath === m.mountPath);
    if (!has) newMounts.push(m);
  }
  if (newEnv.length === 0 && newMounts.length === 0) return c;
  const out = { ...c };
  if (newEnv.length > 0) out.env = [...(c.env ?? []), ...newEnv];
  if (newMounts.length > 0) {
    out.volumeMounts = [...(c.volumeMounts ?? []), ...newMounts];
    added.push({ name: c.name, volumeMounts: newMounts });
  }
  return out;
}

/** `own` plus the items of a name it lacks, in order; undefined when nothing is added. */
function appendNamed(own: Obj[] | undefined, items: readonly Obj[]): Obj[] | undefined {
  const out = [...(own ?? [])];
  for (const item of items) if (!out.some((x) => x.name === item.name)) out.push(item);
  return out.length === (own ?? []).length ? undefined : out;
}

function addName(taken: Set<string>, name: string): boolean {
  if (taken.has(name)) return false;
  taken.add(name);
  return true;
}

/** `own` plus the keys of `maps` it lacks, the first map's value winning; undefined when nothing is added. */
function addKeys(own: Obj | undefined, maps: readonly Obj[]): Obj | undefined {
  const out: Obj = {};
  for (const [k, v] of Object.entries(own ?? {})) define(out, k, v);
  let changed = false;
  for (const map of maps) {
    for (const [k, v] of Object.entries(map)) {
      if (Object.hasOwn(out, k)) continue;
      define(out, k, v);
      changed = true;
    }
  }
  return changed ? out : undefined;
}

function define(map: Obj, key: string, value: unknown): void {
  Object.defineProperty(map, key, { value, enumerable: true, writable: true, configurable: true });
}

interface RenderInput {
  readonly namespace: string;
  readonly meta: Obj;
  readonly spec: Obj;
  readonly stored: { readonly labels: Obj; readonly annotations: Obj };
}

/**
 * The labels and annotations of the pod as it will be stored, which placeholders read: the pod's
 * plus those the templates add, whose values may themselves hold placeholders, so rendered until
 * they settle (at most one round per template, plus one).
 */
function storedMaps(meta: Obj, selected: readonly TemplateDoc[], namespace: string, spec: Obj): { labels: Obj; annotations: Obj } {
  let stored = { labels: meta.labels ?? {}, annotations: meta.annotations ?? {} };
  for (let round = 0; round <= selected.length + 1; round++) {
    const input = { namespace, meta, spec, stored };
    const next = {
      labels:
        addKeys(
          meta.labels,
          selected.map((t) => render(t.spec['labels'] ?? {}, input)),
        ) ??
        meta.labels ??
        {},
      annotations:
        addKeys(
          meta.annotations,
          selected.map((t) => render(t.spec['annotations'] ?? {}, input)),
        ) ??
        meta.annotations ??
        {},
    };
    if (JSON.stringify(next) === JSON.stringify(stored)) return stored;
    stored = next;
  }
  return stored;
}

const PLACEHOLDER =
  /\{\{\s*(namespace|serviceAccountName|pod\.name|pod\.(labels|annotations)\[\s*(?:'([^']*)'|"([^"]*)")\s*\])\s*(?:\|\s*default\s+(?:'([^']*)'|"([^"]*)")\s*)?\}\}/g;

/** Placeholders expanded in every string value (never in keys): docs/templates.md's table; an empty value takes the `default`. */
function render(value: unknown, input: RenderInput): any {
  if (typeof value === 'string') {
    return value.replace(PLACEHOLDER, (_m, head: string, map: string | undefined, k1?: string, k2?: string, d1?: string, d2?: string) => {
      const fallback = d1 ?? d2 ?? '';
      const key = k1 ?? k2 ?? '';
      let text: unknown;
      if (head === 'namespace') text = input.namespace;
      // Controller-made pods have only a generateName until the apiserver names them.
      else if (head === 'pod.name') text = input.meta.name || input.meta.generateName;
      // The ServiceAccount admission plugin fills serviceAccountName; `serviceAccount` is its deprecated alias.
      else if (head === 'serviceAccountName') text = input.spec.serviceAccountName || input.spec.serviceAccount || 'default';
      else text = ownValue(map === 'labels' ? input.stored.labels : input.stored.annotations, key);
      return typeof text === 'string' && text !== '' ? text : fallback;
    });
  }
  if (Array.isArray(value)) return value.map((v) => render(v, input));
  if (typeof value === 'object' && value !== null) {
    const out: Obj = {};
    for (const [k, v] of Object.entries(value)) define(out, k, render(v, input));
    return out;
  }
  return value;
}

/** validation.IsValidLabelValue: at most 63 characters, empty or alphanumeric at both ends, `-_.` between. */
function isLabelValue(v: string): boolean {
  return v.length <= 63 && /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/.test(v);
}

/** A template rendered for the pod, with its containers native or not. */
function part(t: TemplateDoc, input: RenderInput, job: boolean): Part {
  const s = render(t.spec, input);
  const native = s['nativeSidecar'] === true || (s['nativeSidecar'] === 'jobs' && job);
  return {
    name: t.name,
    version: t.version,
    native,
    placement: s['placement'],
    containers: (s['containers'] ?? []).map((c: Obj) => (native ? { ...c, restartPolicy: 'Always' } : c)),
    initContainers: s['initContainers'] ?? [],
    volumes: s['volumes'] ?? [],
    imagePullSecrets: s['imagePullSecrets'] ?? [],
    volumeMounts: s['volumeMounts'] ?? [],
    env: s['env'] ?? [],
    annotations: s['annotations'] ?? {},
    labels: s['labels'] ?? {},
  };
}

/**
 * "Per-pod overrides": `T.sidecar-injector.io/{image,cpu,memory}`, when T lists the field, change
 * T's first container; an invalid value denies. Read from the pod as stored (a template may set
 * one: "used as written"). Values are taken trimmed.
 */
function overrideAll(parts: Part[], selected: readonly TemplateDoc[], annotations: Obj): void {
  selected.forEach((t, i) => {
    const fields: string[] = t.spec['overrides'] ?? [];
    const p = parts[i]!;
    for (const field of ['image', 'cpu', 'memory']) {
      const written = ownValue(annotations, `${t.name}.sidecar-injector.io/${field}`);
      if (written === undefined || !fields.includes(field) || p.containers.length === 0) continue;
      const value = written.trim();
      const first = { ...p.containers[0]! };
      if (field === 'image') {
        if ('problem' in parseImage(value)) throw new Denial('override-refused');
        first['image'] = value;
      } else {
        const amount = quantity(value);
        if (amount === undefined || amount <= 0) throw new Denial('override-refused');
        const resources = { ...first['resources'] };
        resources.requests = { ...resources.requests, [field]: value };
        // A limit below the request is raised to it (requests <= limits, core/v1 validation).
        const limit = resources.limits?.[field];
        if (limit !== undefined && (quantity(String(limit)) ?? Infinity) < amount) resources.limits = { ...resources.limits, [field]: value };
        first['resources'] = resources;
      }
      p.containers[0] = first;
    }
  });
}

const SCALE: Readonly<Record<string, number>> = {
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
};

/** A resource.Quantity's value (`<signed number><binary or decimal suffix | e exponent>`), or undefined when the text is none. */
function quantity(text: string): number | undefined {
  const m = /^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$/.exec(text);
  if (m === null) return undefined;
  return Number(m[1]) * (m[2] !== undefined ? Number(`1${m[2]}`) : SCALE[m[3] ?? '']!);
}

/**
 * "Templates used together": two templates may not bring one container name, one port number and
 * protocol, nor one volume, app env var or app mount path defined differently.
 */
function checkConflicts(parts: readonly Part[]): void {
  const claims = new Map<string, [template: string, value: string | undefined]>();
  const claim = (key: string, template: string, value: string | undefined): void => {
    const prior = claims.get(key);
    if (prior === undefined) return void claims.set(key, [template, value]);
    if (prior[0] !== template && (value === undefined || prior[1] !== value)) throw new Denial('template-conflict');
  };
  for (const p of parts) {
    for (const c of [...p.containers, ...p.initContainers]) {
      claim(`container ${c.name}`, p.name, undefined);
      for (const port of c.ports ?? []) claim(`port ${port.containerPort}/${port.protocol ?? 'TCP'}`, p.name, undefined);
    }
    for (const v of p.volumes) claim(`volume ${v.name}`, p.name, canonical(v));
    for (const e of p.env) claim(`env ${e.name}`, p.name, canonical(e));
    for (const m of p.volumeMounts) claim(`mount ${m.mountPath}`, p.name, canonical(m));
  }
}

/** A value's JSON with keys sorted and zero values (false, "", {}, []) left out, as Go's omitempty writes it. */
function canonical(value: unknown): string {
  const strip = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(strip);
    if (typeof v !== 'object' || v === null) return v;
    const out: Obj = {};
    for (const k of Object.keys(v).sort()) {
      const x = strip((v as Obj)[k]);
      if (x === false || x === '' || x === 0 || x === null || x === undefined || (typeof x === 'object' && Object.keys(x as object).length === 0)) continue;
      out[k] = x;
    }
    return out;
  };
  return JSON.stringify(strip(value));
}

/** The status record of docs/templates.md: each template, its version, its sidecars' image repositories (native ones as initContainers), its volumes. */
function statusOf(parts: readonly Part[]): string {
  const injected = parts.map((p) => {
    const record: Obj = { template: p.name, version: p.version };
    const sidecars = Object.fromEntries(p.containers.map((c) => [c.name, imageRepository(String(c.image ?? ''))]));
    if (p.containers.length > 0) record[p.native ? 'initContainers' : 'containers'] = sidecars;
    if (p.volumes.length > 0) record['volumes'] = p.volumes.map((v) => v.name);
    return record;
  });
  return JSON.stringify({ templates: parts.map((p) => p.name), injected });
}

function ownValue(map: Obj | undefined, key: string): string | undefined {
  if (map === undefined || map === null || !Object.hasOwn(map, key)) return undefined;
  const v = map[key];
  return typeof v === 'string' ? v : undefined;
}
