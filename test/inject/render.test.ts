import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { injectSidecars } from '../../src/inject/mutate.js';
import { copyWithKeys, isOwnedByJob, renderTemplates } from '../../src/inject/render.js';
import { compileTemplate } from '../../src/templates/template.js';
import { diff } from '../../src/patch/diff.js';
import { optedInPod } from '../helpers/review.js';
import { agent, jobOwner, podWith, set, template, templates } from '../helpers/templates.js';

function agentOf(pod: any, set = templates): any {
  return renderTemplates(pod, [set.templates.get('agent')!], 'default')[0]!.containers;
}

describe('per-pod overrides', () => {
  it('overrides the image of the first container only', () => {
    const [first, helper] = agentOf(podWith({ 'agent.sidecar-injector.io/image': 'registry.example.com/agent:1.1@sha256:' + 'a'.repeat(64) }));
    assert.equal(first.image, 'registry.example.com/agent:1.1@sha256:' + 'a'.repeat(64));
    assert.equal(helper.image, 'registry.example.com/helper:1.0');
  });

  it('sets the request and raises a limit that would fall below it', () => {
    const [c] = agentOf(podWith({ 'agent.sidecar-injector.io/cpu': '150m', 'agent.sidecar-injector.io/memory': '256Mi' }));
    assert.deepEqual(c.resources, { requests: { cpu: '150m', memory: '256Mi' }, limits: { cpu: '200m', memory: '256Mi' } });
  });

  it('leaves the template untouched when the pod overrides nothing (same rendered object)', () => {
    const pod = podWith({});
    assert.equal(
      renderTemplates(pod, [templates.templates.get('agent')!], 'default')[0],
      templates.templates.get('agent')!.render({ namespace: 'default', podName: '', serviceAccountName: 'default', labels: {}, annotations: {} }),
    );
  });

  it('lets a template read its own annotations through placeholders', () => {
    const [locked] = renderTemplates(podWith({ 'locked.sidecar-injector.io/level': 'debug' }), [templates.templates.get('locked')!], 'default')[0]!.containers;
    assert.deepEqual(locked!.env, [{ name: 'LEVEL', value: 'debug' }]);
  });

  it('lets a template read its own annotations through a double-quoted placeholder key', () => {
    const quoted = set(
      template(
        'quoted',
        `  containers:
    - name: quoted
      image: registry.example.com/quoted:1.0
      args: ['--level={{ pod.annotations["quoted.sidecar-injector.io/level"] }}']
`,
      ),
    );
    const pod = optedInPod({ annotations: { 'sidecar-injector.io/templates': 'quoted', 'quoted.sidecar-injector.io/level': 'debug' } });
    const [c] = renderTemplates(pod, [quoted.templates.get('quoted')!], 'default')[0]!.containers;
    assert.deepEqual(c!.args, ['--level=debug']);
  });
});

describe('native sidecars for Job pods only', () => {
  it("recognizes a pod owned by a Job (a CronJob's pods are too)", () => {
    assert.equal(isOwnedByJob({ metadata: { ownerReferences: jobOwner } }), true);
    assert.equal(isOwnedByJob({ metadata: { ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'x' }] } }), false);
    assert.equal(isOwnedByJob({}), false);
  });

  it('injects init containers with restartPolicy Always into a Job pod, and ordinary containers elsewhere', () => {
    const job = injectSidecars(podWith({}, { ownerReferences: jobOwner }), [templates.templates.get('agent')!], 'default').pod;
    assert.deepEqual(
      job.spec?.initContainers?.map((c) => [c.name, c.restartPolicy]),
      [
        ['agent', 'Always'],
        ['agent-helper', 'Always'],
      ],
    );
    assert.deepEqual(
      job.spec?.containers?.map((c) => c.name),
      ['web'],
    );
    const plain = injectSidecars(podWith({}), [templates.templates.get('agent')!], 'default').pod;
    assert.deepEqual(
      plain.spec?.containers?.map((c) => [c.name, c.restartPolicy]),
      [
        ['web', undefined],
        ['agent', undefined],
        ['agent-helper', undefined],
      ],
    );
    assert.equal(plain.spec?.initContainers, undefined);
  });
});

describe('rendering against the pod as it will be stored', () => {
  const reader = template(
    'reader',
    `  annotations:
    reader.example.com/mode: sidecar
  containers:
    - name: reader
      image: registry.example.com/reader:1
      env:
        - name: MODE
          value: "{{ pod.annotations['reader.example.com/mode'] | default 'none' }}"
`,
  );
  const readers = set(reader);

  it('sees the annotations its own template adds, so a re-invoked review patches nothing and warns of nothing', () => {
    const pod = optedInPod({ annotations: { 'sidecar-injector.io/templates': 'reader' } });
    const once = injectSidecars(pod, [readers.templates.get('reader')!], 'default');
    assert.deepEqual(once.pod.spec?.containers?.[1]?.env, [{ name: 'MODE', value: 'sidecar' }]);
    const twice = injectSidecars(once.pod, [readers.templates.get('reader')!], 'default');
    assert.deepEqual(diff(once.pod, twice.pod), []);
    assert.deepEqual(twice.warnings, []);
  });

  it("renders a template once per review when another reads a key the list adds, so a pod's own rendering is never kept", () => {
    const named = template(
      'named',
      `  containers:
    - name: named
      image: registry.example.com/named:1
      args: ["--pod={{ pod.name }}"]
`,
    );
    const both = set(reader, named);
    const list = [both.templates.get('reader')!, both.templates.get('named')!];
    const review = (name: string) =>
      renderTemplates(optedInPod({ name, annotations: { 'sidecar-injector.io/templates': 'reader,named' } }), list, 'default')[1]!;
    // The list renders twice (reader reads the annotation it adds); named's key is the same in both rounds.
    const first = review('web-0');
    assert.deepEqual(first.containers[0]!.args, ['--pod=web-0']);
    assert.ok(!Object.isFrozen(first), "a pod's first review keeps nothing: the second round is not a second sighting");
    const again = review('web-0');
    assert.ok(Object.isFrozen(again), 'the same pod reviewed again: kept from this second sighting on');
    assert.equal(review('web-0'), again);
  });

  it('applies an override annotation that a selected template adds, though no template reads it', () => {
    const pinner = template(
      'pinner',
      `  annotations:
    agent.sidecar-injector.io/image: registry.example.com/agent:2.0
`,
    );
    const both = set(agent, pinner);
    const pod = optedInPod({ annotations: { 'sidecar-injector.io/templates': 'agent,pinner' } });
    const [rendered] = renderTemplates(pod, [both.templates.get('agent')!, both.templates.get('pinner')!], 'default');
    assert.equal(rendered!.containers[0]!.image, 'registry.example.com/agent:2.0');
  });

  it("lets the pod's own value win over the template's", () => {
    const pod = optedInPod({ annotations: { 'sidecar-injector.io/templates': 'reader', 'reader.example.com/mode': 'debug' } });
    const once = injectSidecars(pod, [readers.templates.get('reader')!], 'default');
    assert.deepEqual(once.pod.spec?.containers?.[1]?.env, [{ name: 'MODE', value: 'debug' }]);
  });
});

describe('rendered values Kubernetes refuses (issue 21)', () => {
  const owner = set(
    template(
      'owner',
      `  labels:
    team: "{{ pod.annotations['example.com/team'] | default 'none' }}"
`,
    ),
  );

  it('denies a pod whose value renders a label value the apiserver refuses, naming the template, the field and the value', () => {
    const pod = optedInPod({ annotations: { 'example.com/team': 'payments eu' } });
    assert.throws(
      () => injectSidecars(pod, [owner.templates.get('owner')!], 'default'),
      (err: any) => {
        assert.equal(err.code, 'TEMPLATE_VALUE_INVALID');
        assert.match(
          err.message,
          /^template "owner" renders \/spec\/labels\/team as "payments eu" \(from "\{\{ pod\.annotations\['example\.com\/team'\] \| default 'none' \}\}"\), which Kubernetes refuses as a label value: /,
        );
        return true;
      },
    );
    assert.equal(
      injectSidecars(optedInPod({ annotations: { 'example.com/team': 'payments' } }), [owner.templates.get('owner')!], 'default').pod.metadata?.labels?.[
        'team'
      ],
      'payments',
    );
  });

  it("does not deny for a label whose value is never applied: the pod's value wins, then the first template's", () => {
    const pod = optedInPod({ annotations: { 'example.com/team': 'payments eu' }, labels: { team: 'payments' } });
    assert.equal(injectSidecars(pod, [owner.templates.get('owner')!], 'default').pod.metadata?.labels?.['team'], 'payments');
    const both = set(template('core', '  labels:\n    team: core\n'), template('owner', `  labels:\n    team: "{{ pod.annotations['example.com/team'] }}"\n`));
    const selected = [both.templates.get('core')!, both.templates.get('owner')!];
    assert.equal(
      injectSidecars(optedInPod({ annotations: { 'example.com/team': 'payments eu' } }), selected, 'default').pod.metadata?.labels?.['team'],
      'core',
    );
  });

  it("denies {{ pod.name }} in a label value for a controller's pod, rather than a patch the apiserver refuses", () => {
    // The loader refuses this template; compiled directly, as a template read before this check was.
    const t = compileTemplate('owner-pod', 'owner.yaml', { labels: { 'owner-pod': '{{ pod.name }}' } });
    const pod = {
      metadata: { generateName: 'web-7d9f8b6c5-', labels: { 'sidecar-injector.io/inject': 'true' } },
      spec: { containers: [{ name: 'web', image: 'nginx' }] },
    };
    assert.throws(
      () => injectSidecars(pod, [t], 'default'),
      /template "owner-pod" renders \/spec\/labels\/owner-pod as "web-7d9f8b6c5-" .*\{\{ pod\.name \}\} is the generateName/,
    );
    assert.equal(injectSidecars({ ...pod, metadata: { ...pod.metadata, name: 'web-0' } }, [t], 'default').pod.metadata?.labels?.['owner-pod'], 'web-0');
  });
});

describe('copyWithKeys', () => {
  it('keeps a __proto__ key of either map as a key, the prototype untouched', () => {
    const own = JSON.parse('{"a":"1","__proto__":"p"}') as Record<string, string>;
    const added = JSON.parse('{"__proto__":"q","b":"2"}') as Record<string, string>;
    const out = copyWithKeys(own, added);
    assert.deepEqual(Object.keys(out), ['a', '__proto__', 'b']);
    assert.equal(Object.getOwnPropertyDescriptor(out, '__proto__')?.value, 'q');
    assert.equal(Object.getPrototypeOf(out), Object.prototype);
    assert.deepEqual(Object.keys(copyWithKeys(own, undefined)), ['a', '__proto__']);
  });
});
