import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KeysRead, placedValues, renderedChecks, renderedFault, ruleAt, valueFaults } from '../../src/templates/values.js';

describe('the rule where a template value lands', () => {
  const cases: [string[], string, string[], string[]][] = [
    // [tokens below spec, what, accepted, refused]
    [['labels', 'owner'], 'a label value', ['', 'web', 'web-7d9f8b6c5-0', 'a'.repeat(63)], ['web-7d9f8b6c5-', '-x', 'a b', 'nginx:1.28', 'a'.repeat(64)]],
    [['containers', '0', 'name'], 'a container name', ['agent'], ['Agent', 'web-', '']],
    [['initContainers', '1', 'image'], 'an image', ['nginx', 'registry.example.com/a/b:1.0'], ['Nginx:1', 'nginx:', ' nginx', 'repo:web-7d9f8b6c5-:x']],
    [['containers', '0', 'env', '2', 'name'], 'an env var name', ['POD_NAME', 'my.var'], ['', 'A=B']],
    [['env', '0', 'name'], 'an env var name', ['LOG_DIR'], ['']],
    [['containers', '0', 'ports', '0', 'name'], 'a port name', ['http'], ['http-web-7d9f8b6c5', '80']],
    [['volumes', '0', 'name'], 'a volume name', ['logs'], ['Logs']],
    [['volumeMounts', '0', 'mountPath'], 'a mount path', ['/var/log'], ['']],
    [['containers', '0', 'resources', 'limits', 'memory'], 'a resource quantity', ['128Mi', '0.5'], ['lots', '-1']],
  ];
  for (const [tokens, what, good, bad] of cases) {
    it(`checks ${tokens.join('/')} as ${what}`, () => {
      const rule = ruleAt(tokens);
      assert.equal(rule?.what, what);
      for (const v of good) assert.equal(rule.problem(v), undefined, `${JSON.stringify(v)} is valid`);
      for (const v of bad) assert.ok(rule.problem(v), `${JSON.stringify(v)} is refused`);
    });
  }

  it('has no rule where any string is taken: annotation values, args, env values', () => {
    for (const tokens of [['annotations', 'a'], ['containers', '0', 'args', '1'], ['containers', '0', 'env', '0', 'value'], ['env', '0', 'value']]) assert.equal(ruleAt(tokens), undefined, tokens.join('/'));
  });

  it('finds the placed values of a spec with their JSON pointers, keys escaped', () => {
    const placed = placedValues({ labels: { 'example.com/owner': '{{ pod.name }}' }, containers: [{ name: 'a', image: 'busybox', args: ['{{ pod.name }}'] }] });
    assert.deepEqual(placed.map((p) => [p.path, p.text]), [['/spec/labels/example.com~1owner', '{{ pod.name }}'], ['/spec/containers/0/name', 'a'], ['/spec/containers/0/image', 'busybox']]);
  });
});

describe('values checked at load', () => {
  it('refuses {{ pod.name }} in a label value: a Deployment pod has only its generateName, ending in "-"', () => {
    const [fault, ...rest] = valueFaults({ labels: { 'owner-pod': '{{ pod.name }}' } }, KeysRead.Present);
    assert.deepEqual(rest, []);
    assert.equal(fault!.path, '/spec/labels/owner-pod');
    assert.match(fault!.message, /generateName "web-7d9f8b6c5-"\), "\{\{ pod\.name \}\}" renders "web-7d9f8b6c5-", which Kubernetes refuses as a label value/);
  });

  it('accepts placeholders whose values are valid there: the namespace in a label value, the pod name in an annotation or env value', () => {
    const spec = {
      labels: { ns: '{{ namespace }}', team: "{{ pod.labels['team'] | default 'none' }}" },
      annotations: { owner: '{{ pod.name }}' },
      containers: [{ name: 'agent', image: "registry.example.com/agent:{{ pod.annotations['agent/version'] | default '1.0' }}", env: [{ name: 'POD', value: '{{ pod.name }}' }] }],
    };
    assert.deepEqual(valueFaults(spec, KeysRead.Present), []);
  });

  it('refuses static values Kubernetes refuses: a label value with a space, an image the runtime cannot parse', () => {
    const faults = valueFaults({ labels: { team: 'payments eu' }, containers: [{ name: 'a', image: 'Registry.example.com/A:1' }] }, KeysRead.Present);
    assert.deepEqual(faults.map((f) => f.path), ['/spec/labels/team', '/spec/containers/0/image']);
  });

  it('finds, with the keys absent, what only pods without the label get wrong (a lint warning, not a load error)', () => {
    const spec = { containers: [{ name: 'a', image: "registry.example.com/app:{{ pod.labels['version'] }}" }] };
    assert.deepEqual(valueFaults(spec, KeysRead.Present), []);
    const [fault] = valueFaults(spec, KeysRead.Absent);
    assert.match(fault!.message, /for a pod without label "version", .* renders "registry\.example\.com\/app:", which Kubernetes refuses as an image/);
  });
});

describe('values checked at admission', () => {
  it('checks only the values that hold a placeholder, and names the rendered value that breaks its rule', () => {
    const spec = { labels: { team: "{{ pod.annotations['team'] }}", fixed: 'yes' }, annotations: { a: '{{ pod.name }}' } };
    const checks = renderedChecks(spec);
    assert.deepEqual(checks.map((c) => c.path), ['/spec/labels/team']);
    assert.equal(renderedFault(checks, { labels: { team: 'payments', fixed: 'yes' } }), undefined);
    const fault = renderedFault(checks, { labels: { team: 'payments eu', fixed: 'yes' } });
    assert.equal(fault?.value, 'payments eu');
  });
});
