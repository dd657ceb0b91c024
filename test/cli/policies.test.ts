import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { cli } from '../helpers/cli.js';

describe('policies and lint --policies', () => {
  it('prints a MutatingAdmissionPolicy and two bindings per bundled template, and the validating policy with its bindings; exit 0', async () => {
    const r = await cli(['policies', 'templates', '-o', 'json']);
    assert.equal(r.code, 0, r.err);
    const kinds = (JSON.parse(r.out) as { items: { kind: string; metadata: { name: string } }[] }).items.map((o) => `${o.kind}/${o.metadata.name}`);
    assert.deepEqual(kinds, [
      'MutatingAdmissionPolicy/sidecar-injector-log-shipper',
      'MutatingAdmissionPolicyBinding/sidecar-injector-log-shipper-pod',
      'MutatingAdmissionPolicyBinding/sidecar-injector-log-shipper-namespace',
      'MutatingAdmissionPolicy/sidecar-injector-proxy',
      'MutatingAdmissionPolicyBinding/sidecar-injector-proxy-pod',
      'MutatingAdmissionPolicyBinding/sidecar-injector-proxy-namespace',
      'ValidatingAdmissionPolicy/sidecar-injector-validate',
      'ValidatingAdmissionPolicyBinding/sidecar-injector-validate-pod',
      'ValidatingAdmissionPolicyBinding/sidecar-injector-validate-namespace',
    ]);
  });

  it('writes YAML kubectl reads, and keeps the given namespace out of injection', async () => {
    const r = await cli(['policies', 'templates', '--namespace', 'platform']);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /values:\n\s+- kube-system\n\s+- kube-public\n\s+- kube-node-lease\n\s+- platform\n/);
    assert.equal(r.out.split('---\n').map((d) => parse(d) as { kind: string }).length, 9);
  });

  it('names each template that does not compile with the reason, and exits 1: the webhook must inject it', async () => {
    const r = await cli(['policies', 'test/fixtures/cli/templates', '-o', 'json']);
    assert.equal(r.code, 1);
    assert.equal(
      r.err,
      'template "log-agent": not compiled to a policy: overrides (image, cpu, memory) are read from annotations and checked by the webhook; not compiled to CEL; the webhook injects it\n' +
        'template "mesh": not compiled to a policy: overrides (cpu) are read from annotations and checked by the webhook; not compiled to CEL; the webhook injects it\n',
    );
    const validating = (JSON.parse(r.out) as { items: { kind: string; spec: { validations?: { expression: string }[] } }[] }).items.find(
      (o) => o.kind === 'ValidatingAdmissionPolicy',
    )!;
    assert.match(validating.spec.validations![1]!.expression, /"log-agent", "mesh"/, 'a pod that selects them is refused, not left without sidecars');
  });

  it('lint --policies adds one line per template; lint alone prints what it always did', async () => {
    const r = await cli(['lint', 'templates', '--policies']);
    assert.equal(r.code, 0, r.err);
    assert.match(
      r.out,
      /\npolicy: template "log-shipper": MutatingAdmissionPolicy sidecar-injector-log-shipper( \([^\n]*\))?\npolicy: template "proxy": MutatingAdmissionPolicy sidecar-injector-proxy( \([^\n]*\))?\n(policy: CEL cost unchecked: [^\n]*\n)?$/,
    );
    const plain = await cli(['lint', 'templates']);
    assert.doesNotMatch(plain.out, /policy:/);
    const fixtures = await cli(['lint', 'test/fixtures/cli/templates', '--policies']);
    assert.match(fixtures.out, /\npolicy: template "mesh": webhook only: overrides \(cpu\) are read from annotations/);
  });
  it('does not compile a required template: the policies could not keep a pod from skipping it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'policies-required-'));
    await writeFile(
      join(dir, 'agent.yaml'),
      'apiVersion: sidecar-injector.io/v1alpha1\nkind: SidecarTemplate\nmetadata:\n  name: agent\nspec:\n  required: {}\n  containers:\n    - name: agent\n      image: registry.example/agent:1\n',
    );
    const r = await cli(['policies', dir, '-o', 'json']);
    assert.equal(r.code, 1);
    assert.match(r.err, /^template "agent": not compiled to a policy: spec\.required /);
  });
});
