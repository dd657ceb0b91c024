/**
 * The worst reviews a client can send within the apiserver's 3 MiB request limit (issue 11), and
 * how long each keeps the event loop busy: the synchronous work the server does per review
 * (nesting scan, JSON.parse, envelope and shape check, the handler, the answer's JSON), timed in
 * this process. `npm run bench` also sends them over TLS to the product and reports the worst delay
 * a small review sees meanwhile.
 *
 * Usage: node --import tsx bench/shapes.ts [runs] [shape,...]
 */
import { pathToFileURL } from 'node:url';
import { mutate } from '../src/admission/handlers.js';
import { checkBody, decodeReview, encodeReview, MetadataLimits } from '../src/admission/review.js';
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
  return { apiVersion: 'v1', kind: 'Pod', metadata: { generateName: 'web-', namespace: 'shop', ...metadata, labels: { app: 'web', ...OPT_IN, ...(metadata as { labels?: object }).labels } }, spec };
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

function annotationsWithin(bytes: number): Record<string, string> {
  const out: Record<string, string> = {};
  let used = 0;
  for (const key of keys(200_000)) {
    if (used + key.length > bytes) break;
    out[key] = '';
    used += key.length;
  }
  return out;
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

/** Every shape, built on demand (some take a second to build). */
export const Shapes: Readonly<Record<string, () => Shape>> = {
  typical: () => ({ name: 'typical', what: 'a Deployment pod of 1 container (reference)', text: review(pod({}, { containers: [app] })) }),
  'annotations-256k': () => {
    const annotations = annotationsWithin(MetadataLimits.annotationBytes);
    return { name: 'annotations-256k', what: `${Object.keys(annotations).length} annotations, 256 KiB in all (Kubernetes' limit), injected`, text: review(pod({ annotations }, { containers: [app] })) };
  },
  'annotations-3mib': () => {
    const text = fill((n) => pod({ annotations: Object.fromEntries(keys(n).map((k) => [k, ''])) }, { containers: [app] }), 400_000);
    return { name: 'annotations-3mib', what: 'as many annotations as 3 MiB holds, refused (over 256 KiB)', text };
  },
  'labels-3mib': () => {
    const text = fill((n) => pod({ labels: Object.fromEntries(keys(n).map((k) => [k, ''])) }, { containers: [app] }), 400_000);
    return { name: 'labels-3mib', what: 'as many labels as 3 MiB holds (Kubernetes sets no count), injected', text };
  },
  'containers-limit': () => {
    const text = fill((n) => pod({}, { containers: containers(1000, () => ({ args: ['x'.repeat(n)] })) }), 4000);
    return { name: 'containers-limit', what: '1000 containers (--max-containers) filling 3 MiB, injected', text };
  },
  'containers-over': () => {
    const text = fill((n) => pod({}, { containers: containers(n, () => ({})) }), 200_000);
    return { name: 'containers-over', what: 'as many containers as 3 MiB holds, refused (--max-containers)', text };
  },
  'env-limit': () => {
    const env = Array.from({ length: 1000 }, (_, i) => ({ name: `E${i}`, value: '' }));
    const text = fill((n) => pod({}, { containers: containers(n, () => ({ env })) }), 1000);
    return { name: 'env-limit', what: '1000 env vars (--max-env-per-container) in as many containers as 3 MiB holds, injected', text };
  },
  'mounts-limit': () => {
    const volumes = Array.from({ length: 1000 }, (_, i) => ({ name: `v${i}`, emptyDir: {} }));
    const mounts = Array.from({ length: 998 }, (_, i) => ({ name: `v${i}`, mountPath: `/m/${i}` }));
    const text = fill((n) => pod({}, { volumes: volumes.slice(0, 998), containers: containers(n, () => ({ volumeMounts: mounts })) }), 1000);
    return { name: 'mounts-limit', what: '998 volumes and 998 mounts (--max-mounts-per-container) in as many containers as 3 MiB holds, injected', text };
  },
  'long-strings': () => {
    const text = fill((n) => pod({ annotations: { note: 'x'.repeat(200_000) } }, { containers: [{ ...app, env: [{ name: 'BLOB', value: 'x'.repeat(n) }] }] }), MAX_REVIEW_BYTES);
    return { name: 'long-strings', what: 'one env value of ~2.8 MiB and a 200 KB annotation, injected', text };
  },
  'deep-allowed': () => {
    // 60 levels inside spec.affinity, 64 from the top of the body: the deepest allowed, in a field the injector never reads.
    const text = fill((n) => pod({}, { containers: [app], affinity: { x: Array.from({ length: n }, () => nested(57)) } }), 100_000);
    return { name: 'deep-allowed', what: 'spec.affinity filled with values nested to the limit (64 levels), injected', text };
  },
  'deep-over': () => {
    const depth = Math.floor((MAX_REVIEW_BYTES - 400) / 2);
    const text = review(pod({}, { containers: [app], affinity: 'DEEP' })).replace('"DEEP"', '['.repeat(depth) + ']'.repeat(depth));
    return { name: 'deep-over', what: `${depth} levels of brackets, refused before parsing`, text: text.slice(0, MAX_REVIEW_BYTES) };
  },
};

/** What the server makes of a body, synchronously: the answer's decision, or the HTTP error code. */
export function handleReview(text: string, set: TemplateSet): string {
  try {
    checkBody(text);
    const decoded = decodeReview(JSON.parse(text));
    const result = mutate(decoded.request, set);
    encodeReview(decoded.apiVersion, result.response);
    return result.response.allowed ? result.decision : `refused: ${result.response.status?.message.slice(0, 60) ?? ''}`;
  } catch (err) {
    if (err instanceof InjectorError) return `HTTP ${err.status} ${err.code}`;
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
}

/** Times `runs` reviews of each shape in this process (after one warm-up). */
export async function measureShapes(names: readonly string[], runs: number): Promise<ShapeFigures[]> {
  const set = await loadTemplateSet('templates');
  const out: ShapeFigures[] = [];
  for (const name of names) {
    const shape = Shapes[name]!();
    const answer = handleReview(shape.text, set);
    const times: number[] = [];
    for (let i = 0; i < runs; i++) {
      const started = performance.now();
      handleReview(shape.text, set);
      times.push(performance.now() - started);
    }
    times.sort((a, b) => a - b);
    out.push({ name, what: shape.what, bytes: Buffer.byteLength(shape.text), answer, worstMs: times.at(-1)!, medianMs: times[Math.floor(times.length / 2)]! });
  }
  return out;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const runs = Number(process.argv[2] ?? 10);
  const names = process.argv[3]?.split(',') ?? Object.keys(Shapes);
  for (const f of await measureShapes(names, runs)) {
    process.stdout.write(`${f.name.padEnd(18)} ${(f.bytes / 2 ** 20).toFixed(2)} MiB  worst ${f.worstMs.toFixed(1).padStart(7)} ms  median ${f.medianMs.toFixed(1).padStart(7)} ms  ${f.answer}\n`);
  }
}
