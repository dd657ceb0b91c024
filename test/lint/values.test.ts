import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { absentKeyWarnings, podNameWarnings } from '../../src/lint/values.js';
import { set, template } from '../helpers/templates.js';

describe('{{ pod.name }} where a program reads it as the pod name', () => {
  const named = set(
    template(
      'agent',
      `  initContainers:
    - name: setup
      image: busybox
      command: ["sh", "-c", "echo {{ pod.name }}"]
  containers:
    - name: agent
      image: busybox
      args: ["--node", "{{ pod.name }}", "--ns", "{{ namespace }}"]
      env:
        - name: POD_NAME
          value: "{{ pod.name }}"
        - name: REAL_NAME
          valueFrom: { fieldRef: { fieldPath: metadata.name } }
  env:
    - name: OWNER
      value: "pod {{ pod.name }}"
  annotations:
    example.com/created-as: "{{ pod.name }}"
`,
    ),
  ).templates.get('agent')!;

  it('warns at each env value, arg and command of a container and of the application env, and says to use the downward API', () => {
    const warnings = podNameWarnings(named);
    assert.deepEqual(
      warnings.map((w) => w.path),
      ['/spec/initContainers/0/command/2', '/spec/containers/0/env/0/value', '/spec/containers/0/args/1', '/spec/env/0/value'],
    );
    assert.match(
      warnings[1]!.message,
      /generateName \(e\.g\. "web-7d9f8b6c5-"\) for a controller's pods.*valueFrom: \{fieldRef: \{fieldPath: metadata\.name\}\}/,
    );
    assert.match(warnings[2]!.message, /\$\(THAT_VAR\)/);
  });

  it('says nothing of the bundled templates, which use the downward API', async () => {
    const { loadTemplateSet } = await import('../../src/templates/load.js');
    const bundled = await loadTemplateSet('templates');
    for (const t of bundled.templates.values()) assert.deepEqual(podNameWarnings(t), [], t.name);
  });
});

describe('placeholders that fail pods without the key they read', () => {
  it('warns of an image tag from a label that a pod may lack, and of nothing with a default', () => {
    const t = set(
      template(
        'agent',
        `  containers:
    - name: agent
      image: "registry.example.com/agent:{{ pod.labels['version'] }}"
    - name: other
      image: "registry.example.com/other:{{ pod.labels['version'] | default '1.0' }}"
`,
      ),
    ).templates.get('agent')!;
    const warnings = absentKeyWarnings(t);
    assert.deepEqual(
      warnings.map((w) => w.path),
      ['/spec/containers/0/image'],
    );
    assert.match(warnings[0]!.message, /a pod without label "version".*refuses as an image.*default/);
  });
});
