import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parse, parseAllDocuments } from 'yaml';
import { printDocuments } from '../../src/cli/inject.js';
import { loadTemplateSet } from '../../src/templates/load.js';
import { parseDocuments } from '../../src/workload/workload.js';
import { parseKubectl } from '../../src/yaml/kubectl.js';
import { cli, golden } from '../helpers/cli.js';
import { applyPatchV4 } from '../helpers/jsonpatch-v4.js';
import { decodePatch, mutate, podReview } from '../helpers/review.js';

const FIXTURES = 'test/fixtures/cli';
const TEMPLATES = ['--templates-dir', `${FIXTURES}/templates`];
const inputs = readdirSync(`${FIXTURES}/inputs`)
  .filter((f) => f.endsWith('.yaml'))
  .sort();

function run(args: string[], stdin = ''): ReturnType<typeof cli> {
  return cli(['inject', ...args], stdin);
}

function docs(yaml: string): any[] {
  return parseAllDocuments(yaml).map((d) => d.toJS());
}

describe('sidecar-injector inject', () => {
  for (const input of inputs) {
    it(`injects ${input} as admission would (golden), and injecting its output again changes nothing`, async () => {
      const first = await run(['-f', `${FIXTURES}/inputs/${input}`, ...TEMPLATES]);
      assert.equal(first.code, 0, first.err);
      await golden(input.replace('.yaml', '.injected.yaml'), first.out);
      const second = await run(['-f', '-', ...TEMPLATES], first.out);
      assert.equal(second.out, first.out);
    });
  }

  it('makes the log agent a native sidecar in Job and CronJob pods only', async () => {
    for (const [input, pick] of [
      ['job.yaml', (d: any) => d.spec.template.spec],
      ['cronjob.yaml', (d: any) => d.spec.jobTemplate.spec.template.spec],
    ] as const) {
      const spec = pick(docs((await run(['-f', `${FIXTURES}/inputs/${input}`, ...TEMPLATES])).out)[0]);
      assert.deepEqual(spec.initContainers[0], { ...spec.initContainers[0], name: 'log-agent', restartPolicy: 'Always' }, input);
      assert.ok(!spec.containers.some((c: any) => c.name === 'log-agent'), input);
    }
    const deployment = docs((await run(['-f', `${FIXTURES}/inputs/deployment.yaml`, ...TEMPLATES])).out)[0].spec.template.spec;
    assert.deepEqual(
      deployment.containers.map((c: any) => [c.name, c.restartPolicy]),
      [
        ['web', undefined],
        ['log-agent', undefined],
      ],
    );
    assert.equal(deployment.initContainers, undefined);
  });

  it('puts a `placement: first` sidecar ahead of the application container', async () => {
    const deployment = docs((await run(['-f', `${FIXTURES}/inputs/multi.yaml`, ...TEMPLATES])).out)[1];
    assert.deepEqual(
      deployment.spec.template.spec.containers.map((c: any) => c.name),
      ['mesh-proxy', 'web', 'log-agent'],
    );
  });

  it('prints for a Pod with --patch exactly the patch /mutate answers', async () => {
    const printed = await run(['-f', `${FIXTURES}/inputs/pod.yaml`, '--patch', ...TEMPLATES]);
    assert.equal(printed.code, 0);
    await golden('pod.patch.json', printed.out);
    const pod = parse(await readFile(`${FIXTURES}/inputs/pod.yaml`, 'utf8'));
    const answer = mutate(podReview(pod).request, await loadTemplateSet(`${FIXTURES}/templates`));
    assert.deepEqual(JSON.parse(printed.out), decodePatch(answer.response));
  });

  it('prints one patch per document for multi-document input, paths relative to each document', async () => {
    const printed = await run(['-f', `${FIXTURES}/inputs/multi.yaml`, '--patch', ...TEMPLATES]);
    await golden('multi.patch.json', printed.out);
    const entries = JSON.parse(printed.out);
    assert.deepEqual(
      entries.map((e: any) => [e.kind, e.patch.length > 0]),
      [
        ['ConfigMap', false],
        ['Deployment', true],
        ['Service', false],
      ],
    );
    assert.ok(entries[1].patch.every((op: any) => op.path.startsWith('/spec/template/')));
  });

  it('prints JSON with -o json: the object itself, or a List for several documents', async () => {
    const yaml = docs((await run(['-f', `${FIXTURES}/inputs/multi.yaml`, ...TEMPLATES])).out);
    const json = JSON.parse((await run(['-f', `${FIXTURES}/inputs/multi.yaml`, '-o', 'json', ...TEMPLATES])).out);
    assert.deepEqual(json, { apiVersion: 'v1', kind: 'List', items: yaml });
    const single = JSON.parse((await run(['-f', `${FIXTURES}/inputs/pod.yaml`, '-o', 'json', ...TEMPLATES])).out);
    assert.equal(single.kind, 'Pod');
  });

  it("uses --namespace for objects without one and keeps an object's own", async () => {
    const out = docs((await run(['-f', `${FIXTURES}/inputs/list.yaml`, '--namespace', 'team-a', ...TEMPLATES])).out)[0];
    const status = JSON.parse(out.items[1].metadata.annotations['sidecar-injector.io/status']);
    assert.deepEqual(status.templates, ['mesh']);
    const job = docs((await run(['-f', `${FIXTURES}/inputs/job.yaml`, '--namespace', 'team-a', ...TEMPLATES])).out)[0];
    assert.deepEqual(job.spec.template.spec.initContainers[0].env[1], { name: 'POD_NAMESPACE', value: 'team-a' });
  });

  it('fails with exit 1 and prints nothing when a pod would be denied', async () => {
    const denied = [
      ['sidecar-injector.io/templates: "mesh,nope"', /Pod default\/bad: unknown sidecar template\(s\) "nope"/],
      ['mesh.sidecar-injector.io/cpu: "0"\n    sidecar-injector.io/templates: mesh', /annotation mesh.sidecar-injector.io\/cpu: cpu must be greater than zero/],
      ['log-agent.sidecar-injector.io/cpu: lots', /"lots" is not a Kubernetes quantity/],
    ] as const;
    for (const [annotation, message] of denied) {
      const pod = `apiVersion: v1\nkind: Pod\nmetadata:\n  name: bad\n  labels: {sidecar-injector.io/inject: "true"}\n  annotations:\n    ${annotation}\nspec:\n  containers: [{name: a, image: busybox}]\n`;
      const r = await run(['-f', '-', ...TEMPLATES], pod);
      assert.equal(r.code, 1, annotation);
      assert.equal(r.out, '');
      assert.match(r.err, message);
    }
  });

  it('fails with exit 1 for a pod the validating handler would reject after injection', async () => {
    // A Job's pod gets the log agent as a native sidecar; this one already runs a regular container of that name.
    const job = `apiVersion: batch/v1\nkind: Job\nmetadata: {name: clash}\nspec:\n  template:\n    metadata: {labels: {sidecar-injector.io/inject: "true"}}\n    spec:\n      restartPolicy: Never\n      containers: [{name: m, image: busybox}, {name: log-agent, image: registry.example.com/log-agent:1.4.0}]\n`;
    const r = await run(['-f', '-', ...TEMPLATES], job);
    assert.equal(r.code, 1);
    assert.equal(r.out, '');
    assert.match(
      r.err,
      /error: Job default\/clash: the validating webhook validate.sidecar-injector.io \(\/validate\) would reject it: pod opted in to sidecar injection but is missing: native sidecar "log-agent" in initContainers/,
    );
  });

  it('leaves alone the pods the shipped webhook configurations never send (kube-system)', async () => {
    const pod = `apiVersion: v1\nkind: Pod\nmetadata:\n  name: coredns-x\n  namespace: kube-system\n  labels: {sidecar-injector.io/inject: "true"}\nspec:\n  containers: [{name: a, image: busybox}]\n`;
    const r = await run(['-f', '-', ...TEMPLATES], pod);
    assert.equal(r.code, 0, r.err);
    assert.deepEqual(docs(r.out)[0], parse(pod));
    const elsewhere = await run(['-f', '-', ...TEMPLATES], pod.replace('kube-system', 'shop'));
    assert.ok(docs(elsewhere.out)[0].spec.containers.some((c: any) => c.name === 'log-agent'));
  });

  it('warns of annotations it ignores and of a regular sidecar in a Job, and exits 0', async () => {
    const job = `apiVersion: batch/v1\nkind: Job\nmetadata: {name: meshed}\nspec:\n  template:\n    metadata:\n      labels: {sidecar-injector.io/inject: "true"}\n      annotations: {sidecar-injector.io/templates: mesh, mesh.sidecar-injector.io/version: "2"}\n    spec:\n      restartPolicy: Never\n      containers: [{name: m, image: busybox}]\n`;
    const r = await run(['-f', '-', ...TEMPLATES], job);
    assert.equal(r.code, 0, r.err);
    assert.match(r.err, /warning: Job default\/meshed: annotation mesh.sidecar-injector.io\/version: "version" is not an override field/);
    assert.match(r.err, /warning: Job default\/meshed: template "mesh" adds "mesh-proxy" as a regular container to a Job's pod, which then never completes/);
  });

  it("renders {{ pod.name }} from the name fields each controller gives its pods, never the template's own name", async () => {
    const podName = async (workload: string): Promise<string> => {
      const out = docs((await run(['-f', '-', ...TEMPLATES], workload)).out)[0];
      const spec = (out.spec.jobTemplate?.spec ?? out.spec).template.spec;
      const agent = [...(spec.initContainers ?? []), ...spec.containers].find((c: any) => c.name === 'log-agent');
      return agent.env.find((e: any) => e.name === 'POD_NAME').value;
    };
    const template =
      '    metadata: {name: from-template, generateName: also-ignored-, labels: {sidecar-injector.io/inject: "true"}}\n    spec: {restartPolicy: Never, containers: [{name: m, image: busybox}]}\n';
    const cases: [string, string, string][] = [
      ['apps/v1', 'Deployment', 'web-<hash>-'],
      ['apps/v1', 'ReplicaSet', 'web-'],
      ['apps/v1', 'DaemonSet', 'web-'],
      ['apps/v1', 'StatefulSet', 'web-<ordinal>'],
      ['v1', 'ReplicationController', 'web-'],
      ['batch/v1', 'Job', 'web-'],
    ];
    for (const [apiVersion, kind, expected] of cases) {
      assert.equal(await podName(`apiVersion: ${apiVersion}\nkind: ${kind}\nmetadata: {name: web}\nspec:\n  template:\n${template}`), expected, kind);
    }
    assert.equal(
      await podName(`apiVersion: batch/v1\nkind: Job\nmetadata: {name: web}\nspec:\n  completionMode: Indexed\n  template:\n${template}`),
      'web-<index>-',
    );
    assert.equal(
      await podName(
        `apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: web}\nspec:\n  jobTemplate:\n    spec:\n      template:\n${template.replace(/^/gm, '    ')}`,
      ),
      'web-<time>-',
    );
    const out = docs(
      (await run(['-f', '-', ...TEMPLATES], `apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n${template}`)).out,
    )[0];
    assert.equal(out.spec.template.metadata.name, 'from-template', 'the output keeps the template as written');
    assert.equal(out.spec.template.metadata.ownerReferences, undefined);
  });

  it("injects Knative's storage-version-migration Job, written with only generateName, as admission does (issue 21)", async () => {
    const args = ['-f', 'test/fixtures/yaml/knative-storage-version-migration.yaml', ...TEMPLATES, '--namespace-labels', 'sidecar-injector.io/inject=true'];
    const r = await run(args);
    assert.equal(r.code, 0, r.err);
    const job = docs(r.out)[0];
    assert.equal(job.metadata.generateName, 'storage-version-migration-serving-');
    const agent = job.spec.template.spec.initContainers[0];
    assert.deepEqual([agent.name, agent.restartPolicy], ['log-agent', 'Always']);
    assert.deepEqual(agent.env[0], { name: 'POD_NAME', value: 'storage-version-migration-serving-<suffix>-' });
    assert.equal(job.spec.template.metadata.ownerReferences, undefined, 'the template keeps its own metadata');
    const explained = await cli(['explain', ...args]);
    assert.equal(explained.code, 0, explained.out);
    assert.match(explained.out, /^Job knative-serving\/storage-version-migration-serving-<suffix>: injected with log-agent \(injected\)\n/);
  });

  it("gives a pod template without metadata the metadata its patch adds into (the controller's pod has a name)", async () => {
    const job =
      'apiVersion: batch/v1\nkind: Job\nmetadata: {name: bare}\nspec:\n  template:\n    spec: {restartPolicy: Never, containers: [{name: m, image: busybox}]}\n';
    const args = ['-f', '-', ...TEMPLATES, '--namespace-labels', 'sidecar-injector.io/inject=true'];
    const r = await run(args, job);
    assert.equal(r.code, 0, r.err);
    assert.ok(docs(r.out)[0].spec.template.metadata.annotations['sidecar-injector.io/status']);
    const patch = JSON.parse((await run([...args, '--patch'], job)).out);
    assert.deepEqual(patch[0], { op: 'add', path: '/spec/template/metadata', value: {} });
    assert.deepEqual(applyPatchV4(parse(job), patch), docs(r.out)[0]);
  });

  it("prints the pod the mutating webhook's own patch makes, applied as the apiserver applies it", async () => {
    const input = await readFile(`${FIXTURES}/inputs/pod.yaml`, 'utf8');
    const printed = docs((await run(['-f', '-', ...TEMPLATES], input)).out)[0];
    const answer = mutate(podReview(parse(input)).request, await loadTemplateSet(`${FIXTURES}/templates`));
    assert.deepEqual(printed, applyPatchV4(parse(input), decodePatch(answer.response)));
  });

  it('refuses a bad -o value and a missing -f with a usage message and exit 2, a missing file with exit 1', async () => {
    const xml = await run(['-f', 'x.yaml', '-o', 'xml']);
    assert.deepEqual([xml.code, xml.out], [2, '']);
    assert.match(
      xml.err,
      /^sidecar-injector inject: option '-o, --output <format>' argument 'xml' is invalid\. Allowed choices are yaml, json; see 'sidecar-injector inject --help'\n$/,
    );
    const noFile = await run([...TEMPLATES]);
    assert.equal(noFile.code, 2);
    assert.match(noFile.err, /required option '-f, --filename <file>' not specified/);
    const missing = await run(['-f', `${FIXTURES}/inputs/none.yaml`, ...TEMPLATES]);
    assert.equal(missing.code, 1);
    assert.match(missing.err, /cannot read .*none\.yaml: no such file; check the -f path/);
  });

  it('refuses an empty input (a pipe whose first command failed) with exit 1, as explain does', async () => {
    for (const [command, stdin] of [
      ['inject', ''],
      ['inject', '# only a comment\n---\n'],
      ['explain', ''],
    ]) {
      const r = await cli([command!, '-f', '-', ...TEMPLATES], stdin);
      assert.deepEqual([r.code, r.out], [1, ''], command);
      assert.equal(r.err, 'sidecar-injector: cannot read standard input: it holds no Kubernetes object (it is empty, or only comments)\n');
    }
  });

  it('refuses a malformed pod with the checks the server makes, instead of crashing', async () => {
    const pod = 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n  ownerReferences: [null]\nspec:\n  containers: [{name: a, image: b}]\n';
    const r = await run(['-f', '-', ...TEMPLATES], pod);
    assert.equal(r.code, 1);
    assert.match(r.err, /cannot read Pod default\/x: pod\.metadata\.ownerReferences\[0\] must be an object/);
  });
});

/** The documents of a text as kubectl reads them: the reference the output is held to. */
const kubectlReads = (text: string): unknown[] =>
  parseKubectl(text)
    .map((d) => d.value)
    .filter((v) => v !== null);

/** Real manifests (see the header of each for its source) that hold YAML 1.1 traps. */
const REAL = ['test/fixtures/yaml/argocd-redis-deployment.yaml', 'test/fixtures/yaml/calico-kube-controllers.yaml'];

describe('inject keeps the meaning kubectl gives the input (YAML 1.1)', () => {
  for (const file of REAL) {
    it(`prints ${file} so that kubectl reads back exactly what it read from the input, when nothing opts in`, async () => {
      const r = await cli(['inject', '-f', file, '--templates-dir', 'templates']);
      assert.equal(r.code, 0, r.err);
      assert.deepEqual(kubectlReads(r.out), kubectlReads(await readFile(file, 'utf8')));
    });
  }

  it('keeps Argo CD redis\'s "no" argument a string: printed unquoted, kubectl would read false', async () => {
    const [doc] = parseDocuments(await readFile(REAL[0]!, 'utf8'), 'argo');
    const out = printDocuments([doc!], 'yaml');
    assert.match(out, /- "no"\n/);
    assert.match(out, /- ""\n/);
  });

  it('reads defaultMode 0440 as octal (288) and prints it as 0440, not as decimal 440', async () => {
    const [doc] = parseDocuments(await readFile(REAL[1]!, 'utf8'), 'calico');
    const volumes = (doc as any).spec.template.spec.volumes;
    assert.equal(volumes[0].secret.defaultMode, 0o440);
    assert.match(printDocuments([doc!], 'yaml'), /defaultMode: 0440\n/);
  });

  it('reports a YAML error in inject -f with its line and column', async () => {
    const r = await cli(['inject', '-f', '-', '--templates-dir', 'templates'], 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: [unclosed\n');
    assert.equal(r.code, 1);
    assert.match(r.err, /^sidecar-injector: cannot read standard input: YAML at line \d+, column \d+: [^\n]*\n$/);
  });
});

describe('sidecar-injector inject and explain with a value Kubernetes refuses (issue 21)', () => {
  const team = `apiVersion: sidecar-injector.io/v1alpha1\nkind: SidecarTemplate\nmetadata:\n  name: team\nspec:\n  default: true\n  labels:\n    team: "{{ pod.annotations['example.com/team'] | default 'none' }}"\n`;
  const deployment = `apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata:\n      labels: {app: web, sidecar-injector.io/inject: "true"}\n      annotations: {example.com/team: "payments eu"}\n    spec:\n      containers: [{name: web, image: nginx}]\n`;

  it('prints no manifest kubectl apply would refuse: the denial, naming the template, the field and the value', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'inject-values-'));
    await writeFile(join(dir, 'team.yaml'), team);
    const injected = await run(['-f', '-', '--templates-dir', dir], deployment);
    assert.equal(injected.code, 1);
    assert.equal(injected.out, '');
    assert.match(injected.err, /template "team" renders \/spec\/labels\/team as "payments eu" .*refuses as a label value/);
    const explained = await cli(['explain', '-f', '-', '--templates-dir', dir], deployment);
    assert.match(explained.out, /would be REJECTED \(template-value-invalid\)\n(?:.*\n)*.*renders \/spec\/labels\/team as "payments eu"/);
  });
});
