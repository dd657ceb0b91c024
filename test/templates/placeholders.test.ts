import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { compileValue, materialize, placeholdersOf, renderValues, PlaceholderError } from '../../src/templates/placeholders.js';

const pod = {
  metadata: {
    generateName: 'web-5d8f-',
    labels: { app: 'web', 'app.kubernetes.io/name': 'shop' },
    annotations: { 'team.example.com/owner': 'payments', evil: '"}, "securityContext": {"privileged": true}, "x": "' },
  },
  spec: { serviceAccountName: 'web-sa' },
};
const values = renderValues(pod, 'team-a');
const render = (text: string) => materialize(compileValue(text), values);

describe('placeholders', () => {
  const cases: [string, string][] = [
    ['{{ namespace }}', 'team-a'],
    ['{{ pod.name }}', 'web-5d8f-'],
    ['{{ serviceAccountName }}', 'web-sa'],
    ["{{ pod.labels['app.kubernetes.io/name'] }}", 'shop'],
    ['{{ pod.labels["app"] }}', 'web'],
    ["{{ pod.annotations['team.example.com/owner'] }}", 'payments'],
    ["{{ pod.annotations['missing'] | default 'nobody' }}", 'nobody'],
    ["{{ pod.labels['missing'] }}", ''],
    ['pods/{{namespace}}/{{pod.name}}.log', 'pods/team-a/web-5d8f-.log'],
    ['no placeholder', 'no placeholder'],
  ];
  for (const [input, want] of cases) it(`renders ${input}`, () => assert.equal(render(input), want));

  it('uses the name once the pod has one', () => {
    assert.equal(renderValues({ metadata: { name: 'web-0', generateName: 'web-' } }, 'ns').podName, 'web-0');
  });

  it('keeps a value from the pod inside the string it fills, adding no structure', () => {
    const compiled = compileValue({ env: [{ name: 'X', value: "{{ pod.annotations['evil'] }}" }] });
    const out = materialize(compiled, values) as { env: { name: string; value: string }[] };
    assert.deepEqual(Object.keys(out), ['env']);
    assert.deepEqual(Object.keys(out.env[0]!), ['name', 'value']);
    assert.equal(out.env[0]!.value, pod.metadata.annotations.evil);
  });

  it('never reads a key from the prototype', () => {
    assert.equal(render("{{ pod.labels['__proto__'] | default 'safe' }}"), 'safe');
    assert.equal(render("{{ pod.annotations['constructor'] | default 'safe' }}"), 'safe');
  });

  it('shares branches without placeholders instead of copying them', () => {
    const staticPart = { image: 'x', args: ['a'] };
    const compiled = compileValue({ s: staticPart, d: '{{ namespace }}' });
    const out = materialize(compiled, values) as Record<string, unknown>;
    assert.equal(out['s'], staticPart);
    assert.equal(out['d'], 'team-a');
  });

  it('rejects what is not in the grammar', () => {
    for (const bad of ['{{ pod.spec }}', '{{ namespace', "{{ pod.labels[app] }}", '{{ process.env.HOME }}']) {
      assert.throws(() => compileValue(bad, '/x'), PlaceholderError, bad);
    }
  });
});

describe('placeholdersOf', () => {
  it('lists what each placeholder of a text reads, in order, and nothing for plain text', () => {
    assert.deepEqual(placeholdersOf("pods/{{namespace}}/{{ pod.name }}-{{ pod.labels['app'] | default 'x' }}{{ pod.annotations[\"a\"] }}{{ serviceAccountName }}"), ['namespace', 'pod.name', 'pod.labels', 'pod.annotations', 'serviceAccountName']);
    assert.deepEqual(placeholdersOf('plain {{ not one'), []);
    assert.deepEqual(placeholdersOf('plain'), []);
  });
});
