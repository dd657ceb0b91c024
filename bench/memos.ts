/**
 * CPU per review in process, of two copies of the product side by side (before and after a change),
 * timed in alternating rounds so that the load of a shared machine falls on both alike: the mutating
 * and validating handlers on the typical pod (a Deployment's), the same pod owned by a Job
 * (log-shipper becomes a native sidecar), and the whole pipeline without the answer cache.
 * Usage: node --import tsx bench/memos.ts BEFORE_ROOT AFTER_ROOT [iterations]
 * where a root is a checkout, e.g. the code before a change:
 *   mkdir /tmp/before && git archive HEAD~1 src bench templates package.json tsconfig.json | tar -x -C /tmp/before
 *   ln -s "$PWD/node_modules" /tmp/before/node_modules
 */
import fastJsonPatch from 'fast-json-patch';
import { resolve } from 'node:path';
import { Pods, reviewTemplate } from './pods.js';

const [beforeRoot, afterRoot, n = '20000'] = process.argv.slice(2);
if (beforeRoot === undefined || afterRoot === undefined) throw new Error('usage: bench/memos.ts BEFORE_ROOT AFTER_ROOT [iterations]');
const iterations = Number(n);

async function steps(root: string): Promise<[string, () => unknown][]> {
  const at = (p: string) => import(resolve(root, p));
  const { decodeReview } = await at('src/admission/codec.ts');
  const { createHandlers } = await at('src/admission/handlers.ts');
  const { ReviewPipeline } = await at('src/admission/pipeline.ts');
  const { loadTemplateSet } = await at('src/templates/load.ts');
  const set = await loadTemplateSet(resolve(root, 'templates'));
  const handlers = createHandlers({ templates: () => set });
  const mutate = handlers.byPath.get('/mutate')!;
  const validate = handlers.byPath.get('/validate')!;
  const requests = (pod: object) => {
    const t = reviewTemplate(pod);
    const text = Buffer.concat([t.prefix, Buffer.from('00000000-0000-4000-8000-000000000001'), t.suffix]).toString('utf8');
    const review = decodeReview(JSON.parse(text));
    const verdict = mutate(review.request);
    if (verdict.decision !== 'injected') throw new Error(`not injected: ${verdict.decision} ${verdict.reason}`);
    const patch = JSON.parse(Buffer.from(verdict.response.patch ?? '', 'base64').toString('utf8'));
    const injected = { ...review.request, object: fastJsonPatch.applyPatch(structuredClone(review.request.object), patch).newDocument };
    if (validate(injected).decision !== 'allowed') throw new Error('validate did not allow the injected pod');
    return { request: review.request, injected, bytes: Buffer.from(text) };
  };
  const typical = requests(Pods.typical);
  const jobPod = structuredClone(Pods.typical) as { metadata: { ownerReferences: object[] } };
  jobPod.metadata.ownerReferences = [{ apiVersion: 'batch/v1', kind: 'Job', name: 'nightly', uid: '2f0c2a9e-6a55-4c1e-9d0a-3b8f7e2d1c4a', controller: true }];
  const job = requests(jobPod);
  const fresh = new ReviewPipeline({ endpoint: '/mutate', handle: mutate, generation: handlers.generation, answerCacheBytes: 0 });
  return [
    ['mutate, typical pod', () => mutate(typical.request)],
    ['validate, typical pod injected', () => validate(typical.injected)],
    ['mutate, the typical pod owned by a Job', () => mutate(job.request)],
    ['validate, that Job pod injected', () => validate(job.injected)],
    ['whole pipeline, no answer cache, typical pod', () => fresh.review(typical.bytes)],
  ];
}

function cpu(fn: () => unknown, times: number): number {
  const start = process.cpuUsage();
  for (let i = 0; i < times; i++) fn();
  const used = process.cpuUsage(start);
  return used.user + used.system;
}

const before = await steps(beforeRoot);
const after = await steps(afterRoot);
const rounds = 10;
for (let s = 0; s < before.length; s++) {
  const [name, a] = before[s]!;
  const b = after[s]![1];
  cpu(a, 2000);
  cpu(b, 2000);
  let [ta, tb] = [0, 0];
  for (let r = 0; r < rounds; r++) {
    ta += cpu(a, iterations / rounds);
    tb += cpu(b, iterations / rounds);
  }
  process.stdout.write(`${(ta / iterations).toFixed(2).padStart(8)} µs before ${(tb / iterations).toFixed(2).padStart(8)} µs after  ${name}\n`);
}
