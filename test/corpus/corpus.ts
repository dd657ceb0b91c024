/**
 * The real-world corpus (test/fixtures/corpus, see its SOURCES.md) and the apiserver's side of one
 * pod × template combination over real HTTPS: what /mutate answers, whether the patch applies with
 * evanphx/json-patch v4 semantics, whether the stored pod would be valid, what /validate says, and
 * whether a re-invocation of /mutate adds anything.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { Agent } from 'node:https';
import { join } from 'node:path';
import { Lexer, parseAllDocuments } from 'yaml';
import { httpsRequest } from '../helpers/client.js';
import { applyPatchV4 } from '../helpers/jsonpatch-v4.js';
import { decodePatch, podReview } from '../helpers/review.js';
import { admissionView, defaultPod } from './admission-view.js';
import { podValidationErrors } from './pod-validation.js';

export const CorpusDir = 'test/fixtures/corpus';
export const PodsDir = join(CorpusDir, 'pods');
export const SidecarsDir = join(CorpusDir, 'sidecars');
/** The namespace of a request for a manifest that names none, as `kubectl apply -n corpus` would. */
export const DefaultNamespace = 'corpus';

export interface CorpusManifest {
  /** File name under pods/, e.g. `istio-cronjob.yaml`. */
  readonly file: string;
  readonly object: Record<string, any>;
}

export interface CorpusTemplate {
  readonly file: string;
  readonly name: string;
  readonly text: string;
  /** Names of the containers and init containers the template brings. */
  readonly containers: readonly string[];
  /** The template adds regular containers to a Job's pod (no `nativeSidecar: true` or `jobs`). */
  readonly keepsJobsRunning: boolean;
}

/** Reads YAML as kubectl does (sigs.k8s.io/yaml over go-yaml v2: YAML 1.1 octals and booleans). */
export function readYaml11(file: string): Record<string, any>[] {
  const docs = parseAllDocuments(goYamlEscapes(readFileSync(file, 'utf8')), { version: '1.1' });
  return docs
    .map((d) => {
      if (d.errors.length > 0) throw new Error(`${file}: ${d.errors[0]!.message}`);
      return d.toJS() as Record<string, any>;
    })
    .filter((o) => o !== null && o !== undefined);
}

/**
 * go-yaml v2 reads `\'` in a double-quoted scalar as `'` (scannerc.go); the yaml package refuses it.
 * Rewritten per double-quoted token, escapes read in pairs (the Lexer's marks \x02, \x18, \x1f are not text).
 */
export function goYamlEscapes(text: string): string {
  if (!text.includes("\\'")) return text;
  return [...new Lexer().lex(text)]
    .filter((t) => !['\x02', '\x18', '\x1f'].includes(t))
    .map((t) => (t.startsWith('"') ? t.replace(/\\([\s\S])/g, (e, c: string) => (c === "'" ? "'" : e)) : t))
    .join('');
}

export function corpusManifests(): CorpusManifest[] {
  return readdirSync(PodsDir)
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .map((file) => {
      const docs = readYaml11(join(PodsDir, file));
      if (docs.length !== 1) throw new Error(`${file}: a corpus file holds exactly one object, found ${docs.length}`);
      return { file, object: docs[0]! };
    });
}

export function corpusTemplates(): CorpusTemplate[] {
  return readdirSync(SidecarsDir)
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .map((file) => {
      const text = readFileSync(join(SidecarsDir, file), 'utf8');
      const [doc] = readYaml11(join(SidecarsDir, file));
      const spec = doc?.['spec'] ?? {};
      const containers = [...(spec.initContainers ?? []), ...(spec.containers ?? [])].map((c: any) => String(c.name));
      const native = spec.nativeSidecar === true || spec.nativeSidecar === 'jobs';
      return { file, name: String(doc?.['metadata']?.name), text, containers, keepsJobsRunning: !native && (spec.containers ?? []).length > 0 };
    });
}

/** What became of one combination. */
export type Outcome =
  | { readonly verdict: 'admitted'; readonly warnings: readonly string[] }
  /** Refused by /mutate (allowed: false), or admitted by /mutate and then rejected by /validate. */
  | { readonly verdict: 'refused'; readonly stage: 'mutate' | 'validate'; readonly code: number | undefined; readonly message: string }
  /** The product did something the apiserver would fail on, or that leaves the pod without its sidecar. */
  | { readonly verdict: 'broken'; readonly problem: string };

export class Apiserver {
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 4 });

  constructor(
    private readonly url: string,
    private readonly ca: string,
  ) {}

  close(): void {
    this.agent.destroy();
  }

  async review(path: '/mutate' | '/validate', pod: object, namespace: string): Promise<any> {
    const review = podReview(pod, { namespace });
    const res = await httpsRequest(`${this.url}${path}`, JSON.stringify(review), { ca: this.ca, agent: this.agent });
    if (res.status !== 200) throw new Error(`${path} answered HTTP ${res.status}: ${res.text}`);
    const response = res.json().response;
    if (response?.uid !== review.request.uid) throw new Error(`${path} answered uid ${response?.uid}, sent ${review.request.uid}`);
    return response;
  }

  /**
   * One combination, as the apiserver runs a pod CREATE: mutate, apply the patch, default, validate
   * the object, call the validating webhook, and re-invoke the mutating webhook (reinvocationPolicy
   * IfNeeded) on the patched pod, which must then add nothing.
   */
  async run(manifest: CorpusManifest, selected: readonly CorpusTemplate[]): Promise<Outcome> {
    const { pod, namespace } = admissionView(
      manifest.object,
      selected.map((t) => t.name),
      DefaultNamespace,
    );
    const first = await this.review('/mutate', pod, namespace);
    if (first.allowed !== true) return { verdict: 'refused', stage: 'mutate', code: first.status?.code, message: String(first.status?.message ?? '') };
    let patched: any;
    try {
      patched = applyPatchV4(pod, decodePatch(first));
    } catch (err) {
      return { verdict: 'broken', problem: `the patch does not apply (the apiserver answers 500): ${(err as Error).message}` };
    }
    const stored = defaultPod(patched);
    const invalid = podValidationErrors(stored);
    if (invalid.length > 0) return { verdict: 'broken', problem: `the patched pod is invalid (the apiserver answers 422): ${invalid.join('; ')}` };
    const present = new Set([...(stored.spec.initContainers ?? []), ...stored.spec.containers].map((c: any) => c.name));
    const absent = selected.flatMap((t) => t.containers).filter((c) => !present.has(c));
    if (absent.length > 0) return { verdict: 'broken', problem: `admitted without the templates' containers ${absent.join(', ')}` };
    const verdict = await this.review('/validate', stored, namespace);
    // The apiserver then refuses the CREATE with the validator's message: a refusal, which the test
    // accepts only where its table says why.
    if (verdict.allowed !== true) return { verdict: 'refused', stage: 'validate', code: verdict.status?.code, message: String(verdict.status?.message ?? '') };
    const again = decodePatch(await this.review('/mutate', stored, namespace));
    if (again.length > 0) return { verdict: 'broken', problem: `re-invocation patches again: ${JSON.stringify(again).slice(0, 300)}` };
    const pinned = await this.review('/validate', pinDigests(stored), namespace);
    if (pinned.allowed !== true)
      return { verdict: 'broken', problem: `/validate rejects the pod once a later webhook pinned its images to digests: ${pinned.status?.message}` };
    return { verdict: 'admitted', warnings: first.warnings ?? [] };
  }
}

/**
 * The pod as an image-digest webhook that runs after the injector leaves it (issue 10 item 3: policy
 * engines resolve tags to digests): every image pinned to a digest, and a Docker Hub image written
 * with its registry and without its tag, e.g. `alpine:latest` -> `docker.io/alpine@sha256:...`. The
 * runtime pulls the same image either way, so the validator must still find the sidecar.
 */
export function pinDigests(pod: any): any {
  const out = structuredClone(pod);
  for (const c of [...(out.spec.initContainers ?? []), ...out.spec.containers]) {
    const image = String(c.image);
    const digest = `sha256:${createHash('sha256').update(image).digest('hex')}`;
    const name = image.split('@')[0]!;
    const first = name.split('/')[0]!;
    const hub = !name.includes('/') || !(first.includes('.') || first.includes(':') || first === 'localhost');
    const slash = name.lastIndexOf('/');
    const colon = name.lastIndexOf(':');
    const untagged = colon > slash ? name.slice(0, colon) : name;
    c.image = hub ? `docker.io/${untagged}@${digest}` : `${name}@${digest}`;
  }
  return out;
}

/** Runs `work` over `items` with at most `limit` in flight, keeping the order of results. */
export async function pool<T, R>(items: readonly T[], limit: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await work(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
