import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { templatesConfigmap } from '../../src/cli/drift.js';
import { webhookCalls } from '../../src/kube/selectors.js';
import type { WebhookConfiguration } from '../../src/kube/types.js';
import { CHART } from '../../scripts/render-install.js';
import { run } from '../../scripts/tools.js';
import { helmObjects, kustomizeObjects, kustomizeWithComponent, one, tools, type Obj } from './render.js';

/**
 * Which install a pod reaches, as the apiserver decides it from the rendered webhook configurations'
 * selectors (src/kube/selectors.ts): the pod's sidecar-injector.io/rev wins over its namespace's,
 * as istio.io/rev does, and the default install takes only pods where neither names a revision.
 */
const REV = 'sidecar-injector.io/rev';
const INJECT = 'sidecar-injector.io/inject';

const configurations = (objects: Obj[]): WebhookConfiguration[] => objects.filter((o) => o.kind.endsWith('WebhookConfiguration')) as WebhookConfiguration[];

/** Three installs side by side: the default, "canary" and "b", from the chart and from kustomize. */
const renderings = {
  helm: { default: configurations(helmObjects()), canary: configurations(helmObjects({ set: { revision: 'canary' } })), b: configurations(helmObjects({ set: { revision: 'b' } })) },
  kustomize: { default: configurations(kustomizeObjects('')), canary: configurations(kustomizeWithComponent('base', 'components/revision')) },
};

interface Case {
  readonly namespace: Record<string, string>;
  readonly pod: Record<string, string>;
  /** The install whose webhooks take the pod, or none. */
  readonly install: 'default' | 'canary' | 'b' | undefined;
}

const cases: readonly Case[] = [
  { namespace: { [INJECT]: 'true' }, pod: {}, install: 'default' },
  { namespace: { [INJECT]: 'true', [REV]: 'canary' }, pod: {}, install: 'canary' },
  { namespace: { [INJECT]: 'true' }, pod: { [REV]: 'canary' }, install: 'canary' },
  { namespace: { [INJECT]: 'true', [REV]: 'canary' }, pod: { [REV]: 'b' }, install: 'b' },
  { namespace: { [INJECT]: 'true', [REV]: 'canary' }, pod: { [REV]: 'canary' }, install: 'canary' },
  { namespace: { [INJECT]: 'true', [REV]: 'canary' }, pod: { [INJECT]: 'false' }, install: undefined },
  // Pod scope: the pod opts in, in a namespace that did not.
  { namespace: {}, pod: { [INJECT]: 'true' }, install: 'default' },
  { namespace: { [REV]: 'canary' }, pod: { [INJECT]: 'true' }, install: 'canary' },
  { namespace: {}, pod: { [INJECT]: 'true', [REV]: 'canary' }, install: 'canary' },
  { namespace: { [REV]: 'b' }, pod: { [INJECT]: 'true', [REV]: 'canary' }, install: 'canary' },
  // A revision alone opts nothing in.
  { namespace: { [REV]: 'canary' }, pod: {}, install: undefined },
  // A revision no install serves: no webhook takes the pod (it is created as it is).
  { namespace: { [INJECT]: 'true' }, pod: { [REV]: 'gone' }, install: undefined },
];

describe('revisions', () => {
  for (const [tool, installs] of Object.entries(renderings)) {
    it(`sends each pod to the webhooks of one install at most, the pod's revision winning over its namespace's (${tool})`, () => {
      for (const c of cases) {
        const want = c.install !== undefined && c.install in installs ? c.install : undefined;
        const pod = { namespace: 'apps', namespaceLabels: { 'kubernetes.io/metadata.name': 'apps', ...c.namespace }, podLabels: c.pod };
        const reached = Object.entries(installs).map(([name, configs]) => [name, webhookCalls(pod, configs)] as const).filter(([, calls]) => calls.length > 0);
        const label = `namespace ${JSON.stringify(c.namespace)}, pod ${JSON.stringify(c.pod)}`;
        assert.deepEqual(reached.map(([name]) => name), want === undefined ? [] : [want], label);
        if (want === undefined) continue;
        // One mutating webhook and its validating twin, on the same scope: the pod is checked
        // against the templates of the install that injected it.
        const calls = reached[0]![1];
        assert.deepEqual(calls.map((call) => call.configuration), ['MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration'], label);
        assert.equal(calls[1]!.path, calls[0]!.path.replace('/mutate', '/validate'), label);
      }
    });
  }
});

/**
 * The README's own command for a revision, run as written (with `helm template` for `helm upgrade
 * --install`, and without the user's values file), names its objects as docs/operating.md says and
 * as components/revision and `drift --revision` expect them.
 */
describe('revision names', () => {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  const operating = readFileSync(new URL('../../docs/operating.md', import.meta.url), 'utf8');
  /** The README's `helm upgrade --install ... --set revision=...` command, its continuation lines joined, as arguments. */
  const readmeCommand = (): string[] => {
    const joined = readme.replace(/\\\n\s*/g, ' ');
    const line = joined.split('\n').find((l) => l.startsWith('helm upgrade --install') && l.includes('--set revision='));
    assert.ok(line, 'the README installs a revision with helm upgrade --install');
    return line.replace(/#.*$/, '').trim().split(/\s+/);
  };
  const docs = {
    configMap: /the templates ConfigMap `([^`]+)`/.exec(operating)?.[1],
    objects: /Its objects are named `<name>-(\w+)`/.exec(operating)?.[1],
  };

  it("renders the names docs/operating.md states from the README's command", () => {
    const args = readmeCommand();
    assert.deepEqual(args.slice(0, 3), ['helm', 'upgrade', '--install']);
    const [release, , ...flags] = args.slice(3);
    const set: Record<string, string> = {};
    let namespace = 'default';
    for (let i = 0; i < flags.length; i++) {
      if (flags[i] === '--set') set[flags[i + 1]!.split('=')[0]!] = flags[i + 1]!.split('=')[1]!;
      if (flags[i] === '-n' || flags[i] === '--namespace') namespace = flags[i + 1]!;
    }
    const revision = set['revision']!;
    assert.equal(revision, docs.objects);
    const objects = helmObjects({ release: release!, namespace, set: { revision } });
    assert.equal(docs.configMap, `sidecar-injector-templates-${revision}`);
    one(objects, 'ConfigMap', docs.configMap);
    for (const kind of ['Deployment', 'Service', 'ServiceAccount', 'MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration']) one(objects, kind, `sidecar-injector-${revision}`);
    // drift --revision reads the same ConfigMap by default.
    assert.equal(templatesConfigmap({ revision, templatesConfigmap: 'sidecar-injector/sidecar-injector-templates' }), `${namespace}/${docs.configMap}`);
  });

  it("says in the chart's NOTES how to move a namespace or a pod to the revision", () => {
    const notes = run(tools, 'helm', ['install', '--dry-run=client', 'sidecar-injector-canary', CHART, '-n', 'sidecar-injector', '--set', 'revision=canary']).split('NOTES:')[1] ?? '';
    assert.match(notes, /kubectl label namespace NAME sidecar-injector\.io\/rev=canary/);
    assert.match(notes, /sidecar-injector\.io\/rev: "canary"/);
    assert.match(notes, /deployment\/sidecar-injector-canary\n/);
  });

  it('names every object of components/revision as the chart names them', () => {
    const names = (objects: Obj[]): string[] => objects.filter((o) => o.kind !== 'CustomResourceDefinition' && o.kind !== 'Namespace').map((o) => `${o.kind}/${o.metadata.name}`).sort();
    const helm = names(helmObjects({ release: 'sidecar-injector-canary', set: { revision: 'canary' } }));
    const kustomize = names(kustomizeWithComponent('base', 'components/revision'));
    assert.deepEqual(helm, kustomize);
  });
});
