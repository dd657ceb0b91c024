import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { runCli } from '../../src/cli/program.js';
import { TemplateSetError } from '../../src/errors.js';
import { compileTemplateSet } from '../../src/templates/load.js';
import { captureIO } from '../helpers/cli.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { admissionView } from './admission-view.js';
import {
  Apiserver,
  corpusManifests,
  goYamlEscapes,
  corpusTemplates,
  DefaultNamespace,
  PodsDir,
  pool,
  SidecarsDir,
  type CorpusManifest,
  type CorpusTemplate,
  type Outcome,
} from './corpus.js';
import { podValidationErrors } from './pod-validation.js';

/**
 * Combinations the injector must refuse, each for a reason a person would accept: the pod and the
 * template cannot make one valid pod. `message` is matched against the product's denial.
 */
interface ExpectedRefusal {
  /** A corpus file, or `*`: every pod the selection is tried on (a clash between two templates). */
  readonly pod: string | '*';
  /** One template, or two as the annotation names them (`a,b`, in name order). */
  readonly templates: string;
  /** Who refuses: /mutate (allowed: false), or /validate after /mutate let the pod through. */
  readonly stage: 'mutate' | 'validate';
  readonly message: RegExp;
  readonly why: string;
}

const ExpectedRefusals: readonly ExpectedRefusal[] = [
  {
    pod: 'linkerd-emojivoto-already-injected.yaml',
    templates: 'linkerd-proxy',
    stage: 'validate',
    message: /missing: native sidecar "linkerd-proxy" in initContainers/,
    why: 'the pod already runs a linkerd-proxy:foo as a regular container; the template needs linkerd-proxy as a native sidecar, and a pod cannot hold two containers of one name',
  },
  {
    pod: 'istio-only-proxy-container.yaml',
    templates: 'istio-proxy',
    stage: 'validate',
    message: /missing: native sidecar "istio-proxy" in initContainers/,
    why: 'the pod (an Istio gateway) runs its own istio-proxy as a regular container; the template needs istio-proxy as a native sidecar, and a pod cannot hold two containers of one name',
  },
  {
    pod: 'istio-proxy-override.yaml',
    templates: 'istio-proxy',
    stage: 'validate',
    message: /missing: native sidecar "istio-proxy" in initContainers/,
    why: "the pod overrides Istio's proxy with its own istio-proxy as a regular container (and its own istio-init); the template needs istio-proxy as a native sidecar, and a pod cannot hold two containers of one name",
  },
  {
    pod: 'istio-merge-probers.yaml',
    templates: 'istio-proxy',
    stage: 'validate',
    message: /missing: native sidecar "istio-proxy" in initContainers/,
    why: 'the pod was injected by an Istio that ran istio-proxy as a regular container; the template needs it as a native sidecar, and a pod cannot hold two containers of one name',
  },
  {
    pod: 'helm-bitnami-fluent-bit.yaml',
    templates: 'fluent-bit',
    stage: 'validate',
    message:
      /missing: container "fluent-bit" with image repository cr\.fluentbit\.io\/fluent\/fluent-bit \(it runs docker\.io\/bitnami\/fluent-bit:[^)]*\) \(template "fluent-bit"\)$/,
    why: "the pod is Bitnami's fluent-bit, whose own container is named fluent-bit; the template's sidecar has that name too, and a pod cannot hold two containers of one name. The denial names both images and, the tags differing, suggests no registry mirror",
  },
  {
    pod: 'k8s-website-pod-level-resources.yaml',
    templates: 'cloud-sql-proxy',
    stage: 'mutate',
    message: /spec\.resources would not cover its containers once the sidecars are injected: .*requests\.memory is 100Mi/,
    why: "the pod requests 100Mi at pod level and its container 50Mi; with the sidecar's cpu and memory (the proxy requests 1 cpu and 2Gi) the containers would request more than the pod, which Kubernetes refuses (validatePodResourceConsistency)",
  },
  {
    pod: 'k8s-website-pod-level-resources.yaml',
    templates: 'istio-proxy',
    stage: 'mutate',
    message: /spec\.resources would not cover its containers once the sidecars are injected: .*requests\.memory is 100Mi/,
    why: "the pod requests 100Mi at pod level and its container 50Mi; with the sidecar's memory (Envoy requests 128Mi) the containers would request more than the pod, which Kubernetes refuses (validatePodResourceConsistency)",
  },
  {
    pod: 'k8s-website-pod-level-resources.yaml',
    templates: 'vault-agent',
    stage: 'mutate',
    message: /spec\.resources would not cover its containers once the sidecars are injected: .*requests\.memory is 100Mi/,
    why: "the pod requests 100Mi at pod level and its container 50Mi; with the sidecar's memory (the agent requests 64Mi) the containers would request more than the pod, which Kubernetes refuses (validatePodResourceConsistency)",
  },
  {
    pod: '*',
    templates: 'datadog-trace-agent,fluent-bit',
    stage: 'mutate',
    message: /the selected templates conflict: volume "config" is defined by both template "datadog-trace-agent" and template "fluent-bit"/,
    why: 'both charts name their configuration volume "config" (an emptyDir and a ConfigMap): a pod holds one volume of a name, and each sidecar needs its own',
  },
];

/**
 * Combinations that still fail because of a product bug (a wrong denial, a patch the apiserver cannot
 * apply, an invalid pod). Each is checked to STILL fail with `failure`, so that a fix makes this test
 * fail until the entry is removed: the table cannot rot. `pod: '*'` covers every corpus pod.
 */
interface KnownFailure {
  readonly pod: string | '*';
  /** One template, two (`a,b`), or `*,NAME`: every selection that holds template NAME. */
  readonly templates: string;
  readonly failure: RegExp;
  readonly issue: string;
}

const KnownFailures: readonly KnownFailure[] = [];

/** Manifests that `inject -f` cannot print back today because of a product bug (checked to still fail). */
const KnownInjectFailures: Readonly<Record<string, { readonly failure: RegExp; readonly issue: string }>> = {};

/** The objects of a YAML text as kubectl reads them; [] when it is not YAML. */
function readYaml11Text(text: string): unknown[] {
  try {
    return parseAllDocuments(goYamlEscapes(text), { version: '1.1' })
      .map((d) => d.toJS())
      .filter((o) => o !== null && o !== undefined);
  } catch {
    return [];
  }
}

const manifests = corpusManifests();
const templates = corpusTemplates();

/**
 * Teams combine sidecars (a mesh proxy and the Vault agent, a log shipper and an auth proxy), so every
 * pair of corpus templates is also tried, on pods chosen for their shapes: a Deployment, a Job, a
 * CronJob, a StatefulSet with claims, a hostNetwork DaemonSet, a pod with a native sidecar, one with
 * init containers, and one Istio already injected.
 */
const PairPods = [
  'argocd-repo-server.yaml',
  'ingress-nginx-admission-create.yaml',
  'linkerd-emojivoto-cronjob.yaml',
  'k8s-examples-cassandra-statefulset.yaml',
  'kube-prometheus-nodeExporter-daemonset.yaml',
  'k8s-website-deployment-sidecar.yaml',
  'istio-multi-init.yaml',
  'istio-hello-injected.yaml',
] as const;

interface Selection {
  /** The annotation's value, e.g. `fluent-bit,oauth2-proxy`. */
  readonly key: string;
  readonly templates: readonly CorpusTemplate[];
}

const singles: Selection[] = templates.map((t) => ({ key: t.name, templates: [t] }));
const pairs: Selection[] = templates.flatMap((a, i) => templates.slice(i + 1).map((b) => ({ key: `${a.name},${b.name}`, templates: [a, b] })));

/** The known failures that cover `pod` with `selection` (an exact entry, or a `*,NAME` one). */
function knownFailuresOf(pod: string, selection: Selection): KnownFailure[] {
  return KnownFailures.filter(
    (e) =>
      (e.pod === pod || e.pod === '*') &&
      (e.templates === selection.key || (e.templates.startsWith('*,') && selection.templates.some((t) => t.name === e.templates.slice(2)))),
  );
}

function faultsOf(file: string, text: string): string | undefined {
  try {
    compileTemplateSet([{ file, text }], 'corpus');
    return undefined;
  } catch (err) {
    if (err instanceof TemplateSetError) return err.faults.map((f) => `${f.path}: ${f.message}`).join('; ');
    throw err;
  }
}

function describeOutcome(o: Outcome): string {
  if (o.verdict === 'admitted') return 'admitted';
  if (o.verdict === 'refused') return `refused by /${o.stage} (${o.code}): ${o.message}`;
  return o.problem;
}

describe('real-world corpus', () => {
  let server: TestServer;
  let apiserver: Apiserver;
  let dir: string;
  const outcomes = new Map<string, Outcome>();
  const loadFaults = new Map<string, string>();
  const runs = [
    ...singles.flatMap((selection) => manifests.map((m) => ({ selection, m }))),
    ...pairs.flatMap((selection) => manifests.filter((m) => (PairPods as readonly string[]).includes(m.file)).map((m) => ({ selection, m }))),
  ];

  before(async () => {
    // One server with every template that loads on its own; a template that does not load cannot
    // take the others down with it, and its combinations are reported as failing.
    dir = await mkdtemp(join(tmpdir(), 'corpus-templates-'));
    for (const t of templates) {
      const fault = faultsOf(join(SidecarsDir, t.file), t.text);
      if (fault === undefined) await copyFile(join(SidecarsDir, t.file), join(dir, t.file));
      else loadFaults.set(t.name, fault);
    }
    server = await startTestServer(['--templates-dir', dir]);
    apiserver = new Apiserver(server.url, server.certs.ca.certPem);
    const results = await pool(runs, 4, async ({ selection, m }): Promise<Outcome> => {
      const broken = selection.templates.find((t) => loadFaults.has(t.name));
      if (broken !== undefined) return { verdict: 'broken', problem: `template ${broken.name} does not load: ${loadFaults.get(broken.name)}` };
      return apiserver.run(m, selection.templates);
    });
    runs.forEach(({ selection, m }, i) => outcomes.set(`${m.file} × ${selection.key}`, results[i]!));
  });

  after(async () => {
    apiserver?.close();
    await server?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** What is wrong with the outcomes of `selection` on `pods`, against the two tables. */
  function mismatches(selection: Selection, pods: readonly CorpusManifest[]): string[] {
    const wrong: string[] = [];
    for (const m of pods) {
      const key = `${m.file} × ${selection.key}`;
      const outcome = outcomes.get(key)!;
      const refusal = ExpectedRefusals.find((e) => (e.pod === m.file || e.pod === '*') && e.templates === selection.key);
      const knowns = knownFailuresOf(m.file, selection);
      const known = knowns[0];
      const refused = refusal !== undefined && outcome.verdict === 'refused' && outcome.stage === refusal.stage && refusal.message.test(outcome.message);
      const failsAsKnown = outcome.verdict !== 'admitted' && knowns.some((k) => k.failure.test(describeOutcome(outcome)));
      if (refused || failsAsKnown) continue;
      if (known !== undefined && outcome.verdict === 'admitted') wrong.push(`${key}: admitted now; remove its known failure (${known.issue})`);
      else if (refusal !== undefined)
        wrong.push(`${key}: expected /${refusal.stage} to refuse it with ${refusal.message} (${refusal.why}), got ${describeOutcome(outcome)}`);
      else if (known !== undefined) wrong.push(`${key}: fails differently from its known failure ${known.failure}: ${describeOutcome(outcome)}`);
      else if (outcome.verdict !== 'admitted') wrong.push(`${key}: ${describeOutcome(outcome)}`);
    }
    return wrong;
  }

  it('holds at least 40 manifests and 6 sidecar templates', () => {
    assert.ok(manifests.length >= 40, `${manifests.length} manifests`);
    assert.ok(templates.length >= 6, `${templates.length} templates`);
    for (const t of templates) assert.equal(t.file, `${t.name}.yaml`, 'a sidecar file is named after its template');
    for (const p of PairPods)
      assert.ok(
        manifests.some((m) => m.file === p),
        `no corpus pod ${p}`,
      );
  });

  it('every corpus pod is a valid pod as admission sees it, before injection', () => {
    for (const m of manifests) {
      const { pod } = admissionView(m.object, ['any'], DefaultNamespace);
      assert.deepEqual(podValidationErrors(pod), [], m.file);
    }
  });

  it('the tables name only combinations the test runs, once each', () => {
    const ran = new Set(runs.map(({ selection, m }) => `${m.file} × ${selection.key}`));
    const names = new Set(templates.map((t) => t.name));
    const seen = new Set<string>();
    for (const e of ExpectedRefusals)
      assert.ok(
        [...ran].some((k) => k.endsWith(` × ${e.templates}`) && (e.pod === '*' || k === `${e.pod} × ${e.templates}`)),
        `${e.pod} × ${e.templates} is not a combination the test runs`,
      );
    for (const e of KnownFailures) {
      assert.ok(e.pod === '*' || manifests.some((m) => m.file === e.pod), `no corpus pod ${e.pod}`);
      for (const name of e.templates.split(',')) assert.ok(name === '*' || names.has(name), `no corpus template ${name}`);
    }
    for (const file of Object.keys(KnownInjectFailures))
      assert.ok(
        manifests.some((m) => m.file === file),
        `no corpus pod ${file}`,
      );
    for (const e of [...ExpectedRefusals, ...KnownFailures]) {
      const key = `${e.pod} × ${e.templates}`;
      assert.ok(!seen.has(key), `${key} is listed twice`);
      seen.add(key);
    }
  });

  for (const t of templates) {
    it(`loads the real sidecar template ${t.name}`, () => {
      const fault = faultsOf(join(SidecarsDir, t.file), t.text);
      assert.equal(fault, undefined, `${t.file} does not load: ${fault}`);
    });

    it(`lint reports no error for the real sidecar template ${t.name}`, async () => {
      const own = await mkdtemp(join(tmpdir(), 'corpus-lint-'));
      try {
        await copyFile(join(SidecarsDir, t.file), join(own, t.file));
        const io = captureIO();
        const code = await runCli(['lint', own], io);
        assert.equal(code, 0, io.out() + io.err());
      } finally {
        await rm(own, { recursive: true, force: true });
      }
    });
  }

  it('lint reports no error for the real sidecar templates as one set (the set the server serves here)', async () => {
    const io = captureIO();
    const code = await runCli(['lint', SidecarsDir], io);
    assert.equal(code, 0, io.out() + io.err());
  });

  it('`inject -f` prints each corpus manifest, which opts in to nothing, as an object that means what the input meant', async () => {
    const wrong: string[] = [];
    for (const m of manifests) {
      const io = captureIO();
      let out: string;
      try {
        const code = await runCli(['inject', '-f', join(PodsDir, m.file), '--templates-dir', 'templates'], io);
        out = code === 0 ? io.out() : `exit ${code}: ${io.err()}`;
      } catch (err) {
        out = `threw: ${(err as Error).message}`;
      }
      const known = KnownInjectFailures[m.file];
      const same = isDeepStrictEqual(readYaml11Text(out), [m.object]);
      if (known !== undefined) {
        if (same) wrong.push(`${m.file}: round-trips now; remove its known inject failure`);
        else if (!known.failure.test(out)) wrong.push(`${m.file}: fails differently from its known inject failure ${known.failure}: ${out.slice(0, 300)}`);
      } else if (!same) wrong.push(`${m.file}: ${out.slice(0, 300)}`);
    }
    assert.deepEqual(wrong, [], `\n${wrong.join('\n')}`);
  });

  for (const selection of singles) {
    it(`admits every corpus pod with ${selection.key}, or refuses it as the tables say`, () => {
      const wrong = mismatches(selection, manifests);
      assert.deepEqual(wrong, [], `\n${wrong.join('\n')}`);
    });
  }

  it('warns, when it admits a corpus Job or CronJob pod, that a regular sidecar keeps the Job from completing', () => {
    const jobPods = manifests.filter((m) => m.object['kind'] === 'Job' || m.object['kind'] === 'CronJob');
    assert.ok(jobPods.length >= 5, `${jobPods.length} Job pods`);
    const wrong: string[] = [];
    for (const selection of singles) {
      const [t] = selection.templates;
      for (const m of jobPods) {
        const outcome = outcomes.get(`${m.file} × ${selection.key}`)!;
        if (outcome.verdict !== 'admitted') continue;
        const warned = outcome.warnings.some((w) => w.includes(`"${t!.name}"`) && /Job/.test(w));
        if (warned !== t!.keepsJobsRunning)
          wrong.push(
            `${m.file} × ${t!.name}: ${t!.keepsJobsRunning ? 'no warning that the Job never completes' : `a warning for a native sidecar: ${outcome.warnings.join(' | ')}`}`,
          );
      }
    }
    assert.deepEqual(wrong, [], `\n${wrong.join('\n')}`);
  });

  it(`admits ${PairPods.length} pods of distinct shapes with every pair of corpus templates, or refuses them as the tables say`, () => {
    const pods = manifests.filter((m) => (PairPods as readonly string[]).includes(m.file));
    const wrong = pairs.flatMap((selection) => mismatches(selection, pods));
    assert.deepEqual(wrong, [], `\n${wrong.join('\n')}`);
  });
});
