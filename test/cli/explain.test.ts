import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { cli, golden } from '../helpers/cli.js';

const FIXTURES = 'test/fixtures/cli';
const ARGS = ['-f', `${FIXTURES}/explain.yaml`, '--templates-dir', `${FIXTURES}/templates`];

/** explain's report; the fixture holds pods that would be rejected, so it exits 1. */
async function explain(args: string[], code = 1): Promise<string> {
  const r = await cli(['explain', ...args]);
  assert.equal(r.code, code, r.err);
  return r.out;
}

describe('sidecar-injector explain', () => {
  it('gives each pod its verdict and reason', async () => {
    const report = JSON.parse(await explain([...ARGS, '-o', 'json']));
    assert.deepEqual(
      report.map((e: any) => [e.object, e.verdict, e.reason]),
      [
        ['Pod default/no-label', 'not-injected', 'not-opted-in'],
        ['Pod default/opted-out', 'not-injected', 'opted-out'],
        ['Pod default/defaults', 'injected', 'injected'],
        ['Pod default/named', 'injected', 'injected'],
        ['Pod default/tuned', 'injected', 'injected'],
        ['Pod default/typo', 'rejected', 'unknown-template'],
        ['Pod default/refused', 'rejected', 'override-refused'],
        ['Pod default/ignored', 'injected', 'injected'],
        ['Pod kube-system/coredns-x', 'not-injected', 'namespace-rule'],
        ['Job default/migrate', 'injected', 'injected'],
        ['Job default/clash', 'rejected', 'sidecars-missing'],
        ['Job default/meshed', 'injected', 'injected'],
      ],
    );
    assert.deepEqual(report.find((e: any) => e.object === 'Job default/migrate').warnings, []);
    assert.match(
      report.find((e: any) => e.object === 'Job default/meshed').warnings.join('\n'),
      /template "mesh" adds "mesh-proxy" as a regular container to a Job's pod, which then never completes/,
    );
  });

  it('takes --namespace-labels into the shipped namespaceSelector (a runlevel 0 namespace is never sent)', async () => {
    const report = JSON.parse(await explain([...ARGS, '-o', 'json', '--namespace-labels', 'runlevel=0,team=a'], 0));
    assert.ok(
      report.every((e: any) => e.reason === 'namespace-rule'),
      JSON.stringify(report.map((e: any) => e.reason)),
    );
    const bad = await cli(['explain', ...ARGS, '--namespace-labels', 'runlevel']);
    assert.equal(bad.code, 2);
    assert.match(bad.err, /--namespace-labels <key=value,...>' argument 'runlevel' is invalid\. Expected key=value pairs separated by commas, got "runlevel"/);
  });

  it('says why, with which templates, where each goes, and what was overridden (text golden)', async () => {
    const text = await explain(ARGS);
    await golden('explain.txt', text);
    assert.match(
      text,
      /Pod default\/defaults: injected with log-agent \(injected\)\n {2}- label sidecar-injector.io\/inject="true"\n {2}- no sidecar-injector.io\/templates annotation: the default templates apply/,
    );
    assert.match(text, /\* mesh: container "mesh-proxy" \(registry.example.com\/mesh-proxy:2.0.1\) in containers, first/);
    assert.match(text, /\* log-agent: .*image overridden to registry.example.com\/log-agent:2.0.0/);
    assert.match(text, /Pod default\/tuned: .*\n(?: {2}- .*\n)* {2}\* log-agent: .*; cpu request overridden to 250m; memory request overridden to 128Mi\n/);
    assert.match(
      text,
      /Job default\/migrate: .*\n {2}- .*\n {2}- .*\n {2}- the pod belongs to a Job\n {2}\* log-agent: native sidecar "log-agent" .* in initContainers, first/,
    );
    assert.match(text, /unknown sidecar template\(s\) "log-agnet"/);
    assert.match(
      text,
      /Pod default\/refused: would be REJECTED \(override-refused\)\n(?: {2}- .*\n){2} {2}- annotation mesh.sidecar-injector.io\/cpu: "lots" is not a Kubernetes quantity/,
    );
    assert.match(
      text,
      /Pod default\/ignored: injected with mesh \(injected\)\n(?: {2}[-*] .*\n){3} {2}! warning: annotation mesh.sidecar-injector.io\/memory: template "mesh" does not allow overriding memory \(it allows cpu\); ignored/,
    );
  });

  it('exits 1 when any pod would be rejected, as inject does, and 0 when none would', async () => {
    const rejected = await cli(['explain', ...ARGS]);
    assert.equal(rejected.code, 1);
    assert.match(rejected.out, /would be REJECTED/);
    const fine = await cli(
      ['explain', '-f', '-', '--templates-dir', `${FIXTURES}/templates`],
      'apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {sidecar-injector.io/inject: "true"}}\nspec: {containers: [{name: a, image: busybox}]}\n',
    );
    assert.equal(fine.code, 0, fine.err);
  });
});

describe('sidecar-injector explain: the ServiceAccount token and appContainers (issue 22)', () => {
  const TEMPLATES = `apiVersion: sidecar-injector.io/v1alpha1
kind: SidecarTemplate
metadata: { name: vault-agent }
spec:
  serviceAccountToken: true
  appContainers: { exclude: [istio-proxy] }
  containers: [{ name: vault-agent, image: hashicorp/vault:1.18 }]
  env: [{ name: VAULT_ADDR, value: "http://127.0.0.1:8200" }]
---
apiVersion: sidecar-injector.io/v1alpha1
kind: SidecarTemplate
metadata: { name: spire }
spec:
  serviceAccountToken: { audience: spire }
  containers: [{ name: spire-agent, image: ghcr.io/spiffe/spire-agent:1.11 }]
`;
  const pod = (automount: boolean): string => `apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: { sidecar-injector.io/inject: "true" }
  annotations: { sidecar-injector.io/templates: "vault-agent,spire" }
spec:
  automountServiceAccountToken: ${automount}
  containers: [{ name: app, image: registry.example.com/app:1.0 }, { name: istio-proxy, image: istio/proxyv2:1.24 }]
`;

  async function explained(automount: boolean): Promise<any> {
    const dir = await mkdtemp(join(tmpdir(), 'explain-token-'));
    await mkdir(join(dir, 'templates'));
    await writeFile(join(dir, 'templates', 't.yaml'), TEMPLATES);
    await writeFile(join(dir, 'pod.yaml'), pod(automount));
    const report = JSON.parse(await explain(['-f', join(dir, 'pod.yaml'), '--templates-dir', join(dir, 'templates'), '-o', 'json'], 0));
    await rm(dir, { recursive: true });
    return report[0];
  }

  it('explains the pod as the ServiceAccount plugin hands it to the webhook: the token is there, no warning', async () => {
    const e = await explained(true);
    assert.equal(e.verdict, 'injected');
    assert.deepEqual(e.warnings, []);
    const detail = Object.fromEntries(e.templates.map((t: any) => [t.name, t.detail]));
    assert.match(detail['vault-agent'], /into each app container except istio-proxy: env VAULT_ADDR; the pod's ServiceAccount token, where the pod mounts one/);
    assert.match(detail['spire'], /a ServiceAccount token of its own \(volume sa-token-[0-9a-f]{10}\)/);
  });

  it('does not warn a pod that opts out of its token: it has none to share', async () => {
    const e = await explained(false);
    assert.deepEqual(e.warnings, []);
  });
});
