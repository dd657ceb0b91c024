import assert from 'node:assert/strict';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { TemplateSetError, formatFault } from '../../src/errors.js';
import { Severity, lintTemplates } from '../../src/lint/lint.js';
import { PodSecurityLevel } from '../../src/lint/pod.js';
import { loadTemplateSet } from '../../src/templates/load.js';

const head = (name: string, extra = '') => `apiVersion: sidecar-injector.io/v1alpha1\nkind: SidecarTemplate\nmetadata:\n  name: ${name}\nspec:\n${extra}`;
const sidecar = (name: string, extra = '') => `${head(name)}  nativeSidecar: true\n  containers:\n    - name: ${name}\n      image: registry.example.com/${name}:1\n${extra}`;

/** Template sets the server must refuse; lint must call exactly the same faults errors. */
const BROKEN: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  'unknown field deep in a probe': { 'a.yaml': sidecar('a', '      readinessProbe: { httpGet: { path: /ready, prot: 9901 } }\n') },
  'a decimal file mode': { 'a.yaml': `${head('a')}  volumes:\n    - name: v\n      configMap: { name: c, defaultMode: 775 }\n` },
  'an unquoted YAML 1.1 boolean in args': { 'a.yaml': sidecar('a', '      args: [--appendonly, no]\n') },
  'a YAML syntax error': { 'a.yaml': `${head('a')}  containers: [\n` },
  'duplicate template names across files': { 'a.yaml': sidecar('a'), 'b.yaml': sidecar('a') },
  'default templates that conflict': {
    'a.yaml': `${head('a')}  default: true\n  volumes:\n    - name: shared\n      emptyDir: {}\n`,
    'b.yaml': `${head('b')}  default: true\n  volumes:\n    - name: shared\n      configMap: { name: c }\n`,
  },
  // The old issue: lint checked the template annotations, load did not; now one loader decides.
  'a template annotation key that is not a valid key': { 'a.yaml': `${head('a')}  annotations:\n    "bad key/with/slashes": "1"\n` },
};

async function dirOf(files: Readonly<Record<string, string>>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'lint-'));
  for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
  return dir;
}

describe('lint and serve agree', () => {
  for (const [name, files] of Object.entries(BROKEN)) {
    it(`refuses ${name} in the server's loader, and lint reports the same faults as errors`, async () => {
      const dir = await dirOf(files);
      const refused = await loadTemplateSet(dir).then(
        () => assert.fail('the server loaded a broken set'),
        (err: unknown) => {
          assert.ok(err instanceof TemplateSetError, String(err));
          return err.faults.map(formatFault);
        },
      );
      const report = await lintTemplates(dir, PodSecurityLevel.None);
      const errors = report.faults.filter((f) => f.severity === Severity.Error);
      assert.deepEqual(errors.map(formatFault), refused);
      assert.ok(refused.length > 0 && refused.every((f) => /:\d+:\d+:/.test(f)), `every fault has a position: ${refused.join('\n')}`);
    });
  }

  it('loads in the server every set that lint finds no error in, warnings included', async () => {
    const dir = await dirOf({
      'a.yaml': `${head('a')}  containers:\n    - name: agent\n      image: registry.example.com/a:1\n      securityContext: { privileged: true }\n      ports: [{ name: http, containerPort: 9000 }]\n`,
      'b.yaml': `${head('b')}  volumes:\n    - name: shared\n      emptyDir: {}\n`,
      'c.yaml': `${head('c')}  volumes:\n    - name: shared\n      configMap: { name: c }\n`,
    });
    const report = await lintTemplates(dir, PodSecurityLevel.Restricted);
    assert.equal(report.errors, 0);
    assert.ok(report.warnings > 0);
    await loadTemplateSet(dir);
  });
});

describe('lint severities', () => {
  it('warns, without an error, about a real oauth2-proxy whose port name http is also on the sample pod', async () => {
    const report = await lintTemplates('test/fixtures/yaml/lint/oauth2-proxy', PodSecurityLevel.None);
    assert.equal(report.errors, 0);
    assert.ok(report.faults.some((f) => f.severity === Severity.Warning && /port name "http" is also used by container/.test(f.message)), JSON.stringify(report.faults));
  });

  it('does not require the restricted profile unless asked: a template without seccompProfile has no finding at none', async () => {
    const dir = await dirOf({ 'a.yaml': sidecar('a', '      securityContext: { runAsNonRoot: true }\n') });
    assert.deepEqual((await lintTemplates(dir, PodSecurityLevel.None)).faults, []);
    const restricted = await lintTemplates(dir, PodSecurityLevel.Restricted);
    assert.equal(restricted.errors, 0);
    assert.ok(restricted.faults.some((f) => f.severity === Severity.Warning && /seccompProfile/.test(f.message)));
  });

  it('warns about a template that takes a pod over a pod limit of serve, which the validating webhook would refuse', async () => {
    const env = Array.from({ length: 1001 }, (_, i) => `    - { name: E${i}, value: v }\n`).join('');
    const dir = await dirOf({ 'a.yaml': `${sidecar('a')}  env:\n${env}` });
    const report = await lintTemplates(dir, PodSecurityLevel.None);
    assert.equal(report.errors, 0);
    assert.ok(report.faults.some((f) => f.severity === Severity.Warning && f.template === 'a' && /refused by the validating webhook: .*over the limit of 1000 \(--max-env-per-container\)/.test(f.message)), JSON.stringify(report.faults.slice(0, 2)));
    const fits = await dirOf({ 'a.yaml': `${sidecar('a')}  env:\n${env.split('\n').slice(0, 999).join('\n')}\n` });
    assert.deepEqual((await lintTemplates(fits, PodSecurityLevel.None)).faults, []);
  });

  it('warns about a regular sidecar in Job pods, and not about a native one', async () => {
    const regular = await dirOf({ 'a.yaml': `${head('a')}  containers:\n    - name: agent\n      image: registry.example.com/a:1\n` });
    const report = await lintTemplates(regular, PodSecurityLevel.None);
    assert.ok(report.faults.some((f) => f.severity === Severity.Warning && /as a regular container to a Job.s pod, which then never completes/.test(f.message)));
    const native = await dirOf({ 'a.yaml': sidecar('a') });
    assert.deepEqual((await lintTemplates(native, PodSecurityLevel.None)).faults, []);
  });
});
