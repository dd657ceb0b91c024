/**
 * The worst reviews a client can send within the apiserver's 3 MiB request limit (issue 11), and
 * how long each keeps the event loop busy: the synchronous work the server does per review
 * (nesting scan, JSON.parse, envelope and shape check, the handler, the answer's JSON), timed in
 * this process. `npm run bench` also sends them over TLS to the product and reports how long the
 * product's event loop was blocked (its own measure, on /metrics) and the worst delay a small
 * review sees meanwhile. `npm run soak` sends the costliest of them in its hostile mix.
 *
 * Usage: node --import tsx bench/shapes.ts [runs] [shape,...]
 */
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { get as httpGet } from 'node:http';
import { Agent, request } from 'node:https';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { mutating } from '../src/admission/handlers.js';
import { readFileSync } from 'node:fs';
import { checkBody, decodeBody, DefaultBodyLimits, encodeAnswer, type BodyLimits } from '../src/admission/codec.js';
import { MetadataLimits } from '../src/kube/types.js';
import { Options } from '../src/config/config.js';
import { InjectorError } from '../src/errors.js';
import { loadTemplateSet, type TemplateSet } from '../src/templates/load.js';

/** The apiserver's MaxRequestBodyBytes: no review it sends is larger. */
export const MAX_REVIEW_BYTES = 3 * 1024 * 1024;

export interface Shape {
  readonly name: string;
  readonly what: string;
  /** The review's JSON text, at most MAX_REVIEW_BYTES. */
  readonly text: string;
}

const OPT_IN = { 'sidecar-injector.io/inject': 'true' };
const NODES = Options.maxJsonNodes.schema.default;
const OBJECT_KEYS = Options.maxObjectKeys.schema.default;
const KEYS = Options.maxJsonKeys.schema.default;
/** The most keys one map of a small pod may hold. */
const ONE_MAP = OBJECT_KEYS - 10;

/**
 * Stands in the keys and strings that must be new to V8 in every review (they cost the most to
 * parse the first time; a body sent again would find them interned). `fresh` replaces it.
 */
const SALT = '@@@@';

/**
 * The shape's text with new key names and strings (same length), as each review of it is sent.
 * Made flat, as the server's body is (decoded from one Buffer): the pieces replaceAll leaves would
 * cost the first scan of the text tens of milliseconds to join.
 */
export function fresh(text: string): string {
  if (!text.includes(SALT)) return text;
  return Buffer.from(text.replaceAll(SALT, Math.random().toString(36).slice(2, 6).padEnd(4, '0'))).toString();
}

function review(pod: object): string {
  return JSON.stringify({
    kind: 'AdmissionReview',
    apiVersion: 'admission.k8s.io/v1',
    request: {
      uid: '00000000-0000-4000-8000-000000000000',
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      namespace: 'shop',
      operation: 'CREATE',
      userInfo: { username: 'system:serviceaccount:kube-system:replicaset-controller' },
      object: pod,
      oldObject: null,
      dryRun: false,
    },
  });
}

function pod(metadata: object, spec: object): object {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { generateName: 'web-', namespace: 'shop', ...metadata, labels: { app: 'web', ...OPT_IN, ...(metadata as { labels?: object }).labels } },
    spec,
  };
}

const app = { name: 'web', image: 'nginx:1.27' };

/** Short distinct keys, the densest a map can be per byte. */
function keys(n: number): string[] {
  return Array.from({ length: n }, (_, i) => i.toString(36));
}

/** The largest `n` for which `build(n)` stays within the apiserver's limit (binary search). */
function fill(build: (n: number) => object, max: number): string {
  let lo = 1;
  let hi = max;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (review(build(mid)).length <= MAX_REVIEW_BYTES) lo = mid;
    else hi = mid - 1;
  }
  return review(build(lo));
}

function containers(n: number, each: (i: number) => object): object[] {
  return Array.from({ length: n }, (_, i) => ({ name: `c${i}`, image: 'nginx:1.27', ...each(i) }));
}

/** A value nested `depth` levels, the allowed depth counted from the pod's field. */
function nested(depth: number): unknown {
  let v: unknown = 'x';
  for (let i = 0; i < depth; i++) v = i % 2 === 0 ? [v] : { k: v };
  return v;
}

/** `n` objects of 16 keys whose names are new to V8 and to each other. */
function distinctKeys(n: number): object[] {
  return Array.from({ length: n }, (_, i) => Object.fromEntries(Array.from({ length: 16 }, (_, j) => [`${SALT}${(i * 16 + j).toString(36)}`, 0])));
}

/** A review of a one-container pod whose managedFields entry holds `fields` (fieldsV1 is free-form JSON). */
function managedFieldsReview(fields: object[]): string {
  return review(
    pod(
      { managedFields: [{ manager: 'kubectl', operation: 'Update', apiVersion: 'v1', fieldsType: 'FieldsV1', fieldsV1: { 'f:x': fields } }] },
      { containers: [app] },
    ),
  );
}

/** Every shape, built on demand (some take a second to build). */
export const Shapes: Readonly<Record<string, () => Shape>> = {
  typical: () => ({ name: 'typical', what: 'a pod of 1 container (reference)', text: review(pod({}, { containers: [app] })) }),
  'annotations-256k': () => {
    // As many keys as --max-object-keys allows, long enough to fill Kubernetes' 256 KiB
    // but for 1 KiB left to what the injector adds (its status annotation; a fuller pod is
    // refused, ANNOTATIONS_TOO_LARGE).
    const n = ONE_MAP;
    const width = Math.floor((MetadataLimits.annotationBytes - 1024) / n);
    const key = Math.min(width, MetadataLimits.keyName);
    const annotations = Object.fromEntries(keys(n).map((k) => [k.padEnd(key, '-'), 'v'.repeat(width - key)]));
    return {
      name: 'annotations-256k',
      what: `${n} annotations (--max-object-keys), 256 KiB (Kubernetes' limit): injected`,
      text: review(pod({ annotations }, { containers: [app] })),
    };
  },
  'annotations-3mib': () => {
    const text = fill((n) => pod({ annotations: Object.fromEntries(keys(n).map((k) => [k, ''])) }, { containers: [app] }), 400_000);
    return { name: 'annotations-3mib', what: 'as many annotations as 3 MiB holds: refused before parsing (--max-object-keys)', text };
  },
  'labels-max': () => {
    const n = ONE_MAP;
    const labels = Object.fromEntries(keys(n).map((k) => [k.padEnd(MetadataLimits.keyName, '-'), 'v'.repeat(MetadataLimits.labelValue)]));
    return {
      name: 'labels-max',
      what: `${n} labels (--max-object-keys) of the longest keys and values: injected`,
      text: review(pod({ labels }, { containers: [app] })),
    };
  },
  'labels-3mib': () => {
    const text = fill((n) => pod({ labels: Object.fromEntries(keys(n).map((k) => [k, ''])) }, { containers: [app] }), 400_000);
    return { name: 'labels-3mib', what: 'as many labels as 3 MiB holds: refused before parsing (--max-object-keys)', text };
  },
  'containers-limit': () => {
    const text = fill(
      (n) => pod({}, { containers: containers(Options.maxContainers.schema.default, () => ({ args: ['x'.repeat(n)] })) }),
      MAX_REVIEW_BYTES / Options.maxContainers.schema.default,
    );
    return { name: 'containers-limit', what: `${Options.maxContainers.schema.default} containers (--max-containers) filling 3 MiB: injected`, text };
  },
  'containers-over': () => {
    const text = withinLimits((n) => review(pod({}, { containers: containers(n, () => ({})) })), NODES);
    return { name: 'containers-over', what: 'as many containers as --max-json-keys and --max-json-nodes let through: refused (--max-containers)', text };
  },
  'env-limit': () => {
    const env = Array.from({ length: Options.maxEnvPerContainer.schema.default }, (_, i) => ({ name: `E${i}`, value: '' }));
    const text = withinLimits((k) => review(pod({}, { containers: containers(k, () => ({ env })) })), 100);
    return {
      name: 'env-limit',
      what: `1000 env vars (--max-env-per-container) in each container, as many as --max-json-keys and --max-json-nodes allow: injected`,
      text,
    };
  },
  'mounts-limit': () => {
    const volumes = Array.from({ length: 998 }, (_, i) => ({ name: `v${i}`, emptyDir: {} }));
    const mounts = Array.from({ length: 998 }, (_, i) => ({ name: `v${i}`, mountPath: `/m/${i}` }));
    const text = withinLimits((k) => review(pod({}, { volumes, containers: containers(k, () => ({ volumeMounts: mounts })) })), 100);
    return {
      name: 'mounts-limit',
      what: `998 mounts (--max-mounts-per-container) in each container, as many as --max-json-keys and --max-json-nodes allow: injected`,
      text,
    };
  },
  'nodes-limit': () => {
    // Lists and objects nested to the depth limit in a field the injector never reads: the most parse work allowed.
    const text = withinLimits(
      (n) => review(pod({}, { containers: [app], affinity: { x: Array.from({ length: n }, () => nested(57)) } })),
      Math.ceil(NODES / 57),
    );
    return { name: 'nodes-limit', what: `spec.affinity holding lists and objects nested 64 deep, as many as --max-json-nodes allows: injected`, text };
  },
  'nodes-over': () => {
    const text = fill((n) => pod({}, { containers: [app], affinity: { x: Array.from({ length: n }, () => []) } }), 2_000_000);
    return { name: 'nodes-over', what: 'spec.affinity holding as many empty lists as 3 MiB holds: refused before parsing (--max-json-nodes)', text };
  },
  'keys-distinct': () => {
    // Objects of 16 keys whose names V8 has never seen (new hidden classes and interned strings:
    // the most costly JSON per node), in managedFields, whose fieldsV1 is free-form JSON.
    const text = withinLimits((n) => managedFieldsReview(distinctKeys(n)), Math.ceil(KEYS / 16));
    return { name: 'keys-distinct', what: 'managedFields holding objects of 16 keys new to V8, as many as --max-json-keys allows: injected', text };
  },
  'keys-reordered': () => {
    // 64 names only, 16 of them per object in a new order each time: V8 makes a hidden class per
    // key all the same, so few distinct names can cost as much as many.
    const fields = (n: number): object[] => {
      let seed = 1;
      const random = (): number => (seed = (seed * 48271) % 0x7fffffff) / 0x7fffffff;
      return Array.from({ length: n }, () => {
        const names = Array.from({ length: 64 }, (_, j) => `${SALT}${j.toString(36)}`);
        for (let j = 0; j < 16; j++) {
          const k = j + Math.floor(random() * (64 - j));
          [names[j], names[k]] = [names[k]!, names[j]!];
        }
        return Object.fromEntries(names.slice(0, 16).map((name) => [name, 0]));
      });
    };
    const text = withinLimits((n) => managedFieldsReview(fields(n)), Math.ceil(KEYS / 16));
    return { name: 'keys-reordered', what: 'managedFields holding objects of 16 of 64 names in new orders, as many as --max-json-keys allows: injected', text };
  },
  'keys-same': () => {
    // Objects of the same 16 keys: the cheapest keys to parse, as many as --max-json-keys allows.
    const fields = (n: number): object[] =>
      Array.from({ length: n }, () => Object.fromEntries(Array.from({ length: 16 }, (_, j) => [`${SALT}${j.toString(36)}`, 0])));
    const text = withinLimits((n) => managedFieldsReview(fields(n)), Math.ceil(KEYS / 16));
    return { name: 'keys-same', what: 'managedFields holding objects of the same 16 keys, as many as --max-json-keys allows: injected', text };
  },
  'keys-by-count': () => {
    // Objects holding the first 1, 2, ... 127 of runs of names new to V8: V8 keeps a tree of maps
    // per key count, so each run makes 8128 hidden classes (56 000 of them cost JSON.parse 90 to
    // 190 ms before keys were bounded in all).
    const chain = (c: number): object[] => {
      const names = Array.from({ length: 127 }, (_, j) => `${SALT}${c}-${j}`);
      return names.map((_, n) => Object.fromEntries(names.slice(0, n + 1).map((name) => [name, 0])));
    };
    const text = withinLimits((n) => managedFieldsReview(Array.from({ length: n }, (_, c) => chain(c)).flat()), 16);
    return {
      name: 'keys-by-count',
      what: 'managedFields holding objects of the first 1 to 127 names of runs new to V8, as many as --max-json-keys allows: injected',
      text,
    };
  },
  'one-key-distinct': () => {
    // One-key objects of names new to V8: past 1536 of them V8's map for one-key objects has no
    // room for more transitions and each gets a map of its own (2 to 7 µs a key, measured before
    // keys were bounded in all).
    const text = withinLimits((n) => managedFieldsReview(Array.from({ length: n }, (_, i) => ({ [`${SALT}${i.toString(36)}`]: {} }))), KEYS);
    return {
      name: 'one-key-distinct',
      what: 'managedFields holding one-key objects of names new to V8, as many as --max-json-keys and --max-json-nodes allow: injected',
      text,
    };
  },
  'keys-over': () => {
    // Objects of distinct keys just within --max-json-nodes: refused once --max-json-keys is met.
    const text = managedFieldsReview(distinctKeys(Math.floor((NODES - 100) / 18)));
    return {
      name: 'keys-over',
      what: 'managedFields holding objects of 16 keys new to V8, as many as --max-json-nodes allows: refused before parsing (--max-json-keys)',
      text,
    };
  },
  'keys-and-strings': () => {
    // The costliest body allowed: keys new to V8 up to --max-json-keys, and a container's args of
    // short strings new to V8 (each interned by JSON.parse) up to --max-json-nodes.
    const objects = Math.floor(KEYS / 16) - 16;
    const text = withinLimits(
      (n) =>
        review(
          pod(
            {
              managedFields: [
                { manager: 'kubectl', operation: 'Update', apiVersion: 'v1', fieldsType: 'FieldsV1', fieldsV1: { 'f:x': distinctKeys(objects) } },
              ],
            },
            { containers: [{ ...app, args: newStrings(n) }] },
          ),
        ),
      NODES,
    );
    return {
      name: 'keys-and-strings',
      what: "keys new to V8 up to --max-json-keys, then a container's args of short strings new to V8 up to --max-json-nodes: injected",
      text,
    };
  },
  'strings-distinct': () => {
    // Strings V8 has never seen: JSON.parse interns the short ones (up to 10 characters), as it
    // does keys, and copies the others.
    const text = withinLimits((n) => review(pod({}, { containers: [{ ...app, args: newStrings(n) }] })), NODES);
    return { name: 'strings-distinct', what: "a container's args of short strings new to V8, as many as --max-json-nodes allows: injected", text };
  },
  'strings-3mib': () => {
    const text = fill(
      (n) => pod({}, { containers: [{ ...app, args: Array.from({ length: n }, (_, i) => `${SALT}${i.toString(36)}`.padEnd(11, '.')) }] }),
      600_000,
    );
    return {
      name: 'strings-3mib',
      what: "a container's args of as many strings of 11 characters as 3 MiB holds: refused before parsing (--max-json-nodes)",
      text,
    };
  },
  'numbers-3mib': () => {
    const text = fill((n) => pod({}, { containers: [app], securityContext: { supplementalGroups: Array.from({ length: n }, () => 0) } }), 2_000_000);
    return {
      name: 'numbers-3mib',
      what: 'spec.securityContext.supplementalGroups of as many numbers as 3 MiB holds: refused before parsing (--max-json-nodes)',
      text,
    };
  },
  'whitespace-3mib': () => {
    // A typical review padded with white space between its tokens: the most characters the body scan looks at one by one.
    const small = review(pod({}, { containers: [app] }));
    const pad = ' '.repeat(Math.floor((MAX_REVIEW_BYTES - small.length) / 8));
    let left = 8;
    const text = small.replace(/,/g, (comma) => (left-- > 0 ? `${pad},` : comma));
    return { name: 'whitespace-3mib', what: 'a typical review padded to 3 MiB with white space (the apiserver sends none): injected', text };
  },
  'long-strings': () => {
    const text = fill(
      (n) => pod({ annotations: { note: 'x'.repeat(200_000) } }, { containers: [{ ...app, env: [{ name: 'BLOB', value: 'x'.repeat(n) }] }] }),
      MAX_REVIEW_BYTES,
    );
    return { name: 'long-strings', what: 'one env value of ~2.8 MiB and a 200 KB annotation: injected', text };
  },
  'deep-over': () => {
    const depth = Math.floor((MAX_REVIEW_BYTES - 400) / 2);
    const text = review(pod({}, { containers: [app], affinity: 'DEEP' })).replace('"DEEP"', '['.repeat(depth) + ']'.repeat(depth));
    return { name: 'deep-over', what: `${depth} levels of brackets: refused before parsing`, text: text.slice(0, MAX_REVIEW_BYTES) };
  },
};

/** The shapes `npm run soak` sends: the costliest allowed and refused ones, and a pod refused by a --max-* limit. */
export const SoakShapes = [
  'keys-distinct',
  'keys-reordered',
  'keys-same',
  'keys-by-count',
  'one-key-distinct',
  'keys-and-strings',
  'strings-distinct',
  'containers-limit',
  'annotations-256k',
  'nodes-limit',
  'whitespace-3mib',
  'strings-3mib',
  'nodes-over',
  'keys-over',
  'containers-over',
] as const;

/** `n` short strings new to V8 (JSON.parse interns a string of up to 10 characters). */
function newStrings(n: number): string[] {
  return Array.from({ length: n }, (_, i) => `${SALT}${i.toString(36)}`);
}

/** The largest `n` up to `max` for which `build(n)` passes checkBody at the default limits, or at those changed by `limits` (binary search). */
function withinLimits(build: (n: number) => string, max: number, limits: Partial<BodyLimits> = {}): string {
  let lo = 1;
  let hi = max;
  const fits = (n: number): boolean => {
    try {
      checkBody(build(n), { ...DefaultBodyLimits, ...limits });
      return true;
    } catch {
      return false;
    }
  };
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (fits(mid)) lo = mid;
    else hi = mid - 1;
  }
  return build(lo);
}

/** What the server makes of a body, synchronously: the answer's decision, or the HTTP error. */
export function handleReview(text: string, set: TemplateSet): string {
  try {
    const decoded = decodeBody(text);
    const result = mutating({ templates: () => set })(decoded.request);
    encodeAnswer(decoded, result.response);
    return result.response.allowed ? result.decision : `refused: ${result.response.status?.message.slice(0, 70) ?? ''}`;
  } catch (err) {
    // As the server does: a pod the handler refuses is a denial (HTTP 200, allowed: false); a body refused before decoding is an HTTP 400.
    if (err instanceof InjectorError && err.status < 500) return `${err.code === 'REVIEW_INVALID' ? 'HTTP 400' : 'refused'}: ${err.message.slice(0, 70)}`;
    throw err;
  }
}

export interface ShapeFigures {
  readonly name: string;
  readonly what: string;
  readonly bytes: number;
  readonly answer: string;
  /** Wall milliseconds of the synchronous work per review: the event loop is busy that long. */
  readonly worstMs: number;
  readonly medianMs: number;
  /** CPU milliseconds per review (process.cpuUsage): less sensitive to other work on a shared machine. */
  readonly cpuMs: number;
  /** Wall milliseconds of JSON.parse alone, what any server pays (median); 0 when refused before parsing. */
  readonly parseMs: number;
}

/** Times `runs` reviews of each shape in this process (after one warm-up), each with fresh key names and strings. */
export async function measureShapes(names: readonly string[], runs: number): Promise<ShapeFigures[]> {
  const set = await loadTemplateSet('templates');
  const out: ShapeFigures[] = [];
  for (const name of names) {
    const shape = Shapes[name]!();
    const answer = handleReview(fresh(shape.text), set);
    const times: number[] = [];
    let cpuMicros = 0;
    for (let i = 0; i < runs; i++) {
      const text = fresh(shape.text);
      const cpu = process.cpuUsage();
      const started = performance.now();
      handleReview(text, set);
      times.push(performance.now() - started);
      const used = process.cpuUsage(cpu);
      cpuMicros += used.user + used.system;
    }
    const parses: number[] = [];
    for (let i = 0; !answer.startsWith('HTTP') && i < runs; i++) {
      const text = fresh(shape.text);
      const started = performance.now();
      JSON.parse(text);
      parses.push(performance.now() - started);
    }
    times.sort((a, b) => a - b);
    parses.sort((a, b) => a - b);
    out.push({
      name,
      what: shape.what,
      bytes: Buffer.byteLength(shape.text),
      answer,
      worstMs: times.at(-1)!,
      medianMs: times[Math.floor(times.length / 2)]!,
      cpuMs: cpuMicros / 1000 / runs,
      parseMs: parses[Math.floor(parses.length / 2)] ?? 0,
    });
  }
  return out;
}

export interface TlsFigures {
  readonly name: string;
  /** Latency of the shape's own reviews, ms. */
  readonly medianMs: number;
  readonly worstMs: number;
  /**
   * The product's own measure of its event loop while it took one review of the shape: the
   * largest `nodejs_eventloop_lag_p99_seconds` (prom-client's monitorEventLoopDelay, which
   * /metrics resets at every scrape) in ms, median and worst over the reviews. Its timer ticks
   * every 10 ms, so it reads a block of B ms as B to B + 10 ms.
   */
  readonly loopMedianMs: number;
  readonly loopWorstMs: number;
  /** Latency of a small review sent meanwhile on another connection, ms: the event loop's stall as others see it (CPU contention with the client included). */
  readonly probeWorstMs: number;
  /** The same small review's median with nothing else sent. */
  readonly probeIdleMs: number;
  /** The event loop measure with only the small reviews going (median over as many scrapes), ms. */
  readonly loopIdleMs: number;
  /**
   * CPU time of the product's main thread (its event loop) from sending a review of the shape to
   * 30 ms after its answer, with nothing else sent, median and worst of 5 more reviews, ms (from
   * /proc/<pid>/task/<pid>/schedstat; NaN where there is none): the body's reading, the review,
   * the answer's writing and the garbage collection on that thread; not the collector's helper
   * threads. On a shared machine the event loop measure above also counts the time the main thread
   * waited for a core; this does not, so it bounds the work of the longest block.
   */
  readonly mainCpuMedianMs: number;
  readonly mainCpuWorstMs: number;
  /** Of that window, the main thread's wait for a core (schedstat's run-queue time), worst, ms. */
  readonly runQueueWorstMs: number;
  readonly status: string;
}

/**
 * Sends each shape `reviews` times to a running server over TLS, one at a time, while a small
 * review goes back and forth on a second connection: the worst latency of the small one is how long
 * the big ones held the event loop as a client sees it. Around each review the product's /metrics
 * is scraped on the health port, which gives the event loop's longest block as the product measured
 * it. Every body is made distinct (uid, generateName and the fresh key names of `fresh`), so the
 * answer cache never answers one and V8 has seen none of its new names.
 */
export async function measureShapesOverTls(
  port: number,
  healthPort: number,
  ca: string,
  names: readonly string[],
  reviews: number,
  pid?: number,
): Promise<TlsFigures[]> {
  const sender = post(port, ca, new Agent({ keepAlive: true, maxSockets: 1 }));
  const small = Shapes['typical']!().text;
  // The small review runs in a worker thread, so that this thread's own work (building, encrypting
  // and sending 3 MiB) never delays it: only the server's does.
  const probe = new Worker(PROBE, { eval: true, workerData: { port, ca, small } });
  const ask = async (message: string): Promise<number> => {
    probe.postMessage(message);
    const [worst] = (await once(probe, 'message')) as [number];
    return worst;
  };
  try {
    await ask('start');
    const idleLoops: number[] = [];
    for (let i = 0; i < reviews; i++) {
      await eventLoopMaxMs(healthPort);
      await new Promise((r) => setTimeout(r, 50));
      idleLoops.push(await eventLoopMaxMs(healthPort));
    }
    await ask('stop');
    const loopIdleMs = median(idleLoops);
    const probeIdleMs = await ask('idle');
    const out: TlsFigures[] = [];
    for (const name of names) {
      const text = Shapes[name]!().text;
      await ask('start');
      const times: number[] = [];
      const loops: number[] = [];
      const cpus: number[] = [];
      const waits: number[] = [];
      let status = '';
      for (let i = 0; i < reviews; i++) {
        const body = distinct(text);
        await eventLoopMaxMs(healthPort);
        const r = await sender(body);
        // Work left after the answer (garbage collection finishing, a timer tick that records the
        // block) lands in this review's window, not the next one's.
        await new Promise((resolve) => setTimeout(resolve, 30));
        loops.push(await eventLoopMaxMs(healthPort));
        times.push(r.ms);
        status = r.status;
      }
      const probeWorstMs = await ask('stop');
      // The main thread's CPU per review with nothing else sent (the small reviews would add theirs).
      for (let i = 0; i < Math.min(reviews, 5); i++) {
        const body = distinct(text);
        const before = mainThread(pid);
        await sender(body);
        await new Promise((resolve) => setTimeout(resolve, 30));
        const after = mainThread(pid);
        cpus.push(after.cpuMs - before.cpuMs);
        waits.push(after.waitMs - before.waitMs);
      }
      out.push({
        name,
        medianMs: median(times),
        worstMs: Math.max(...times),
        loopMedianMs: median(loops),
        loopWorstMs: Math.max(...loops),
        probeWorstMs,
        probeIdleMs,
        loopIdleMs,
        mainCpuMedianMs: median(cpus),
        mainCpuWorstMs: Math.max(...cpus),
        runQueueWorstMs: Math.max(...waits),
        status,
      });
    }
    return out;
  } finally {
    await probe.terminate();
  }
}

/** CPU time of a process's main thread so far and its time waiting for a core, ms (NaN without a pid or /proc). */
function mainThread(pid: number | undefined): { readonly cpuMs: number; readonly waitMs: number } {
  if (pid === undefined) return { cpuMs: NaN, waitMs: NaN };
  try {
    const [cpu, wait] = readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ');
    return { cpuMs: Number(cpu) / 1e6, waitMs: Number(wait) / 1e6 };
  } catch {
    return { cpuMs: NaN, waitMs: NaN };
  }
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
}

/**
 * The longest the product's event loop was blocked since the previous scrape, in ms: its
 * `nodejs_eventloop_lag_p99_seconds`, which prom-client resets at every scrape. With fewer than a
 * hundred of its 10 ms ticks between two scrapes (one review), the p99 is their maximum.
 * (`nodejs_eventloop_lag_max_seconds` keeps the last minute's longest delay, issue 20, so it cannot
 * isolate one review.)
 */
export function eventLoopMaxMs(healthPort: number): Promise<number> {
  return new Promise((resolve, reject) => {
    httpGet({ host: '127.0.0.1', port: healthPort, path: '/metrics', agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => {
        const value = /^nodejs_eventloop_lag_p99_seconds (\S+)$/m.exec(text)?.[1];
        if (value === undefined) reject(new Error('no nodejs_eventloop_lag_p99_seconds on /metrics'));
        else resolve(Number(value) * 1000);
      });
    }).on('error', reject);
  });
}

/** The worker that sends the small review: 'idle' answers its median over 30 reviews; 'start' .. 'stop' its worst meanwhile. */
const PROBE = `
const { parentPort, workerData } = require('node:worker_threads');
const { Agent, request } = require('node:https');
const agent = new Agent({ keepAlive: true, maxSockets: 1 });
let n = 0;
const once = () => new Promise((resolve, reject) => {
  const body = workerData.small.replace('00000000-0000-4000-8000-000000000000', 'probe-' + n++);
  const started = performance.now();
  const req = request({ host: '127.0.0.1', port: workerData.port, path: '/mutate', method: 'POST', ca: workerData.ca, servername: 'localhost', agent, headers: { 'content-type': 'application/json' } }, (res) => {
    res.resume();
    res.on('end', () => resolve(performance.now() - started));
  });
  req.on('error', reject);
  req.end(body);
});
let running = false;
let worst = 0;
parentPort.on('message', async (m) => {
  if (m === 'idle') {
    const t = [];
    for (let i = 0; i < 30; i++) t.push(await once());
    parentPort.postMessage(t.sort((a, b) => a - b)[15]);
  } else if (m === 'start') {
    running = true;
    worst = 0;
    parentPort.postMessage(0);
    while (running) worst = Math.max(worst, await once());
  } else {
    running = false;
    setTimeout(() => parentPort.postMessage(worst), 50);
  }
});
`;

/** The shape's text as one more review of it: a new uid and generateName, fresh key names and strings. */
export function distinct(text: string): string {
  return fresh(text)
    .replace('00000000-0000-4000-8000-000000000000', randomUUID())
    .replace('"generateName":"web-"', `"generateName":"web-${randomUUID().slice(0, 8)}-"`);
}

function post(port: number, ca: string, agent: Agent): (body: string) => Promise<{ ms: number; status: string }> {
  return (body) =>
    new Promise((resolve, reject) => {
      const started = performance.now();
      const req = request(
        { host: '127.0.0.1', port, path: '/mutate', method: 'POST', ca, servername: 'localhost', agent, headers: { 'content-type': 'application/json' } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const ms = performance.now() - started;
            const text = Buffer.concat(chunks).toString('utf8');
            const response = res.statusCode === 200 ? JSON.parse(text).response : undefined;
            resolve({
              ms,
              status:
                response === undefined
                  ? `HTTP ${res.statusCode ?? 0}`
                  : response.allowed
                    ? response.patch
                      ? 'injected'
                      : 'allowed'
                    : `refused ${response.status?.code ?? ''}`,
            });
          });
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(body);
    });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const runs = Number(process.argv[2] ?? 10);
  const names = process.argv[3]?.split(',') ?? Object.keys(Shapes);
  for (const f of await measureShapes(names, runs)) {
    const ms = (v: number): string => v.toFixed(1).padStart(6);
    process.stdout.write(
      `${f.name.padEnd(17)} ${(f.bytes / 2 ** 20).toFixed(2)} MiB  worst ${ms(f.worstMs)} ms  median ${ms(f.medianMs)} ms  cpu ${ms(f.cpuMs)} ms  parse ${ms(f.parseMs)} ms  ${f.answer}\n`,
    );
  }
}
