/**
 * The kube-apiserver's CEL cost of the bundled templates' policies, measured by celcost
 * (tools/celcost/: the apiserver's own CEL libraries), on the typical pod (examples/deployment.yaml's
 * pod) and the largest pod of the real-world corpus, each opted in and selecting the template; the
 * ValidatingAdmissionPolicy on those pods as the policies leave them (both templates injected, by
 * the `inject` command, which stores what the policies store: test/policy/parity*.test.ts).
 * Writes the table into BENCHMARKS.md and docs/policies.md (a block each, scripts/generated-block.ts).
 *   node --import tsx scripts/policy-cost.ts [--no-write]   (CELCOST=... or ~/.cache/kubeadmit/celcost)
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from '../src/cli/program.js';
import { compilePolicies } from '../src/policy/compile.js';
import { findCelcost, measureCost, worstExpression, type CostReport, type PolicyCost } from '../src/policy/cost.js';
import { loadTemplateSet } from '../src/templates/load.js';
import { admissionView } from '../test/corpus/admission-view.js';
import { corpusManifests, readYaml11 } from '../test/corpus/corpus.js';
import { captureIO } from '../test/helpers/cli.js';
import { replaceBlock } from './generated-block.js';

const NAMESPACE = 'shop';
const found = findCelcost();
if ('absent' in found) throw new Error(found.absent);
const set = await loadTemplateSet('templates');
const templates = [...set.templates.keys()];
const { objects } = compilePolicies(set, { namespace: 'sidecar-injector' });

const typical = readYaml11('examples/deployment.yaml')[0]!;
const sizeOf = (m: Record<string, any>): number => JSON.stringify(admissionView(m, [], NAMESPACE).pod).length;
const largest = corpusManifests().reduce((a, b) => (sizeOf(b.object) > sizeOf(a.object) ? b : a));
/** Within the apiserver's 3 MiB and the webhook's --max-containers, over its --max-json-keys: where the costliest policy reaches its per-expression limit. */
const wide = {
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'wide', namespace: NAMESPACE },
  spec: {
    containers: Array.from({ length: 250 }, (_, i) => ({
      name: `app-${i}`,
      image: 'registry.example/app:1.0',
      env: Array.from({ length: 40 }, (_, j) => ({ name: `SETTING_${j}`, value: 'on' })),
      volumeMounts: Array.from({ length: 20 }, (_, j) => ({ name: `data-${j}`, mountPath: `/data/${j}` })),
    })),
    volumes: Array.from({ length: 20 }, (_, j) => ({ name: `data-${j}`, emptyDir: {} })),
  },
};
/** A pod whose templates annotation names `n` unknown templates (10 KB at 5,000; annotations may hold 256 KiB): the webhook refuses it at once (TEMPLATE_UNKNOWN), the policies' bounds too. */
const manyNames = (n: number) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'many-names', namespace: NAMESPACE, annotations: { 'sidecar-injector.io/templates': `TEMPLATE${',x'.repeat(n)}` } },
  spec: { containers: [{ name: 'app', image: 'registry.example/app:1.0' }] },
});
/** One container over --max-containers: the webhook refuses it (POD_OVER_LIMIT), the policies' bounds too. */
const overContainers = {
  ...wide,
  metadata: { name: 'over-containers', namespace: NAMESPACE },
  spec: { containers: wide.spec.containers.concat([{ ...wide.spec.containers[0]!, name: 'app-250' }]), volumes: wide.spec.volumes },
};
const samples = [
  { label: 'typical pod (examples/deployment.yaml)', manifest: typical },
  { label: `largest corpus pod (${largest.file})`, manifest: largest.object },
  { label: 'a pod of 250 containers (--max-containers), 40 env and 20 mounts each', manifest: wide },
  { label: 'a pod of 251 containers (--max-containers + 1), 40 env and 20 mounts each', manifest: overContainers, over: true },
  { label: 'a pod naming the template and 5,000 unknown ones (a 10 KB annotation)', manifest: manyNames(5_000), names: true, over: true },
  { label: 'a pod naming the template and 20,000 unknown ones (a 40 KB annotation)', manifest: manyNames(20_000), names: true, over: true },
];

/** The pod as the apiserver holds it after the policies (the `inject` command's output), or why the webhook refuses it. */
async function injected(pod: object): Promise<object | string> {
  const dir = await mkdtemp(join(tmpdir(), 'policy-cost-'));
  try {
    await writeFile(join(dir, 'pod.json'), JSON.stringify(pod));
    const io = captureIO();
    const code = await runCli(['inject', '-f', join(dir, 'pod.json'), '--templates-dir', 'templates', '-n', NAMESPACE, '-o', 'json'], io);
    if (code !== 0) return io.err().trim();
    return JSON.parse(io.out()) as object;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

interface Row {
  readonly policy: string;
  readonly pod: string;
  readonly bytes: number;
  readonly cost: PolicyCost;
  /** The pod's index in the report. */
  readonly index: number;
  readonly limits: CostReport['limits'];
}

const rows: Row[] = [];
for (const sample of samples) {
  const view = (names: string[]): Record<string, any> => {
    const pod = admissionView(sample.manifest, names, NAMESPACE).pod;
    const annotations = pod['metadata']['annotations'];
    if ('names' in sample)
      annotations['sidecar-injector.io/templates'] = sample.manifest.metadata.annotations['sidecar-injector.io/templates'].replace('TEMPLATE', names.join(','));
    return pod;
  };
  const pods = templates.map((t) => view([t]));
  const both = await injected(view(templates));
  const refused = typeof both === 'string';
  if (refused) console.error(`${sample.label}: the webhook refuses it (${both}); the validating policy runs on it without sidecars`);
  const why = refused
    ? both.includes('--max-json-keys')
      ? '--max-json-keys'
      : both.includes('--max-containers')
        ? '--max-containers'
        : both.includes('unknown sidecar template')
          ? 'TEMPLATE_UNKNOWN'
          : both
    : '';
  const report = await measureCost(found.binary, objects, [...pods, refused ? pods[0]! : both], { namespace: NAMESPACE });
  for (const p of report.policies) {
    // Each MutatingAdmissionPolicy on the pod that selects its template; the validating policy on the injected pod.
    const i = p.kind === 'ValidatingAdmissionPolicy' ? pods.length : templates.findIndex((t) => p.name === `sidecar-injector-${t}`);
    // Over the bounds, the bounds policy alone goes past its matchConditions.
    const bounds = p.name.endsWith('-validate-bounds');
    if (p.pods[i]!.matched !== (bounds || !('over' in sample))) throw new Error(`${p.name}: matched ${p.pods[i]!.matched} on ${sample.label}`);
    rows.push({
      policy: `${p.kind} ${p.name}`,
      pod: refused && i === pods.length ? `${sample.label}, not injected: the webhook refuses it (${why})` : sample.label,
      bytes: JSON.stringify(i < pods.length || refused ? pods[Math.min(i, pods.length - 1)] : both).length,
      cost: p,
      index: i,
      limits: report.limits,
    });
  }
}

const fmt = (n: number): string => n.toLocaleString('en-US');
const estimate = (p: PolicyCost): string => {
  const bounded = p.expressions.filter((e) => e.estimated?.max !== null && e.estimated?.max !== undefined);
  const most = Math.max(...bounded.map((e) => e.estimated!.max!));
  return `${p.expressions.length - bounded.length} of ${p.expressions.length} unbounded; bounded ones up to ${fmt(most)}`;
};
const limits = rows[0]!.limits;
const table = [
  '| policy | pod (bytes as JSON) | charged for the pod, of 10,000,000 | its time here, ms | costliest expression alone, of 1,000,000 | estimated per expression over the Pod schema |',
  '| --- | --- | ---: | ---: | --- | --- |',
  ...rows.map((r) => {
    const worst = worstExpression(r.cost, r.index) ?? { field: '-', cost: 0 };
    const pod = r.cost.pods[r.index]!;
    const charged =
      pod.error === undefined
        ? `${fmt(pod.cost)}${pod.matched ? '' : ' (matchConditions: left alone)'}`
        : `**over**: ${fmt(pod.cost)}, cancelled (${pod.error.includes('cost limit') ? 'per-expression limit' : pod.error})`;
    return `| ${r.policy} | ${r.pod} (${fmt(r.bytes)}) | ${charged} | ${pod.ms.toFixed(1)} | ${fmt(worst.cost)} (\`${worst.field}\`) | ${estimate(r.cost)} |`;
  }),
].join('\n');
const date = new Date().toISOString().slice(0, 10);
const body = `## The apiserver's CEL cost of the compiled policies (\`scripts/policy-cost.ts\`)

Measured by celcost (\`tools/celcost/\`, linked against the kube-apiserver's own CEL libraries, k8s.io/apiserver 0.36) on ${date}: each
expression compiled and evaluated as the policy plugins do (plugincel's \`ForInput\`), cost in CEL cost units. The apiserver's limits
(k8s.io/apiserver/pkg/apis/cel/config.go): ${fmt(limits.perCall)} per evaluation of one expression, ${fmt(limits.perPolicy)} per
mutation of a MutatingAdmissionPolicy or for all validations of a ValidatingAdmissionPolicy, ${fmt(limits.matchConditions)} for a
policy's matchConditions. Each MutatingAdmissionPolicy on the pod opted in and selecting its template; the ValidatingAdmissionPolicy
on the pod with both templates injected. "Charged" is what the plugin charges for the pod (matchConditions, then the mutation or the
validations); "alone" is one expression evaluated by itself, the variables it reads included. The estimate is cel-go's over the Pod's
OpenAPI schema (sizes bounded by the apiserver's 3 MiB request); "unbounded" where cel-go cannot trace a size to the schema
(a string read through an optional field, \`lists.range\` of a computed number): the apiserver does not estimate admission
policies when it stores them, only its runtime limits apply.

${table}
`;
process.stdout.write(`${body}\n`);
if (!process.argv.includes('--no-write')) {
  const name = 'scripts/policy-cost.ts';
  await writeFile('BENCHMARKS.md', replaceBlock(await readFile('BENCHMARKS.md', 'utf8'), name, body));
  const docs = await readFile('docs/policies.md', 'utf8');
  await writeFile('docs/policies.md', replaceBlock(docs, name, body.replace(/^## /, '### ')));
}
