import assert from 'node:assert/strict';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { TemplateSetError, formatFault } from '../../src/errors.js';
import { Severity, lintTemplates, type LintFinding } from '../../src/lint/lint.js';
import { PodSecurityLevel } from '../../src/lint/pod.js';
import { loadTemplateSet } from '../../src/templates/load.js';

const head = (name: string, extra = '') => `apiVersion: sidecar-injector.io/v1alpha1\nkind: SidecarTemplate\nmetadata:\n  name: ${name}\nspec:\n${extra}`;
const sidecar = (name: string, extra = '') =>
  `${head(name)}  nativeSidecar: true\n  containers:\n    - name: ${name}\n      image: registry.example.com/${name}:1\n${extra}`;

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
  // Issue 21: `lint` said "1 template(s) OK", and the apiserver refused every pod of a Deployment.
  'a {{ pod.name }} label value': { 'a.yaml': `${head('a')}  labels:\n    owner-pod: "{{ pod.name }}"\n` },
  // The old issue: lint checked the template annotations, load did not; now one loader decides.
  'a template annotation key that is not a valid key': { 'a.yaml': `${head('a')}  annotations:\n    "bad key/with/slashes": "1"\n` },
  'a token that expires in less than 10 minutes': {
    'a.yaml': sidecar('a').replace('  nativeSidecar: true\n', '  serviceAccountToken: { expirationSeconds: 300 }\n'),
  },
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

describe('lint of serviceAccountToken and appContainers (issue 22)', () => {
  it('finds nothing wrong with either form of serviceAccountToken nor with appContainers, at the restricted level', async () => {
    const restricted =
      '      securityContext: { runAsNonRoot: true, allowPrivilegeEscalation: false, capabilities: { drop: [ALL] }, seccompProfile: { type: RuntimeDefault } }\n';
    const dir = await dirOf({
      'a.yaml': sidecar('a', restricted).replace(
        '  nativeSidecar: true\n',
        '  nativeSidecar: true\n  serviceAccountToken: true\n  appContainers: { exclude: [istio-proxy] }\n  env: [{ name: A, value: "1" }]\n',
      ),
      'b.yaml': sidecar('b', restricted).replace(
        '  nativeSidecar: true\n',
        '  nativeSidecar: true\n  serviceAccountToken: { audience: vault, expirationSeconds: 3600, path: vault-token }\n',
      ),
    });
    const report = await lintTemplates(dir, PodSecurityLevel.Restricted);
    assert.deepEqual(report.faults.map(formatFault), []);
  });
});

describe('lint severities', () => {
  it('warns, without an error, about a real oauth2-proxy whose port name http is also on the sample pod', async () => {
    const report = await lintTemplates('test/fixtures/yaml/lint/oauth2-proxy', PodSecurityLevel.None);
    assert.equal(report.errors, 0);
    assert.ok(
      report.faults.some((f) => f.severity === Severity.Warning && /port name "http" is also used by container/.test(f.message)),
      JSON.stringify(report.faults),
    );
  });

  it('warns, naming both containers, of a sidecar port the sample app declares too, in the template that adds it, native or not (issue 21)', async () => {
    const port = '      ports: [{ containerPort: 8080 }]\n';
    const files: Record<string, string> = {
      native: sidecar('native', port),
      regular: `${head('regular')}  nativeSidecar: jobs\n  containers:\n    - name: regular\n      image: registry.example.com/regular:1\n${port}`,
    };
    for (const [t, text] of Object.entries(files)) {
      const report = await lintTemplates(await dirOf({ [`${t}.yaml`]: text }), PodSecurityLevel.None);
      const [fault, ...more] = report.faults.filter((f) => /8080\/TCP/.test(f.message));
      assert.equal(more.length, 0, JSON.stringify(report.faults));
      assert.equal(fault?.severity, Severity.Warning);
      assert.equal(fault?.path, '/spec/containers/0/ports/0/containerPort', JSON.stringify(fault));
      assert.match(fault?.message ?? '', new RegExp(`container "app".*container "${t}"|container "${t}".*container "app"`));
      assert.match(fault?.message ?? '', /fail to bind/);
    }
  });

  it('does not require the restricted profile unless asked: a template without seccompProfile has no finding at none', async () => {
    const dir = await dirOf({ 'a.yaml': sidecar('a', '      securityContext: { runAsNonRoot: true }\n') });
    assert.deepEqual((await lintTemplates(dir, PodSecurityLevel.None)).faults, []);
    const restricted = await lintTemplates(dir, PodSecurityLevel.Restricted);
    assert.equal(restricted.errors, 0);
    assert.ok(restricted.faults.some((f) => f.severity === Severity.Warning && /seccompProfile/.test(f.message)));
  });

  it('warns about a template that takes a pod over a pod limit of serve, which the validating webhook would refuse, saying how far over', async () => {
    const env = Array.from({ length: 1001 }, (_, i) => `    - { name: E${i}, value: v }\n`).join('');
    const dir = await dirOf({ 'a.yaml': `${sidecar('a')}  env:\n${env}` });
    const report = await lintTemplates(dir, PodSecurityLevel.None);
    assert.equal(report.errors, 0);
    const over =
      /the validating webhook would refuse every pod given this template: 1001 env vars in one container, 1 over --max-env-per-container \(1000\): the pod has 1001 env vars in spec.containers\[0\], over the limit of 1000 \(--max-env-per-container\)/;
    assert.ok(
      report.faults.some((f) => f.severity === Severity.Warning && f.template === 'a' && over.test(f.message)),
      JSON.stringify(report.faults.slice(0, 2)),
    );
    const fits = await dirOf({ 'a.yaml': `${sidecar('a')}  env:\n${env.split('\n').slice(0, 999).join('\n')}\n` });
    assert.deepEqual((await lintTemplates(fits, PodSecurityLevel.None)).faults, []);
  });

  /** The findings of a limit's flag, by template. */
  const byTemplate = (faults: readonly LintFinding[], flag: string): Record<string, string[]> => {
    const out: Record<string, string[]> = {};
    for (const f of faults.filter((f) => f.message.includes(`--${flag}`))) (out[f.template ?? ''] ??= []).push(f.message);
    return out;
  };
  const envOf = (prefix: string, n: number): string => `  env:\n${Array.from({ length: n }, (_, i) => `    - { name: ${prefix}${i}, value: v }\n`).join('')}`;

  it('blames the template that goes over a limit alone, never the template it is paired with (even the first one)', async () => {
    // "a" sorts first: lint used to blame the first template of every pair that went over.
    const dir = await dirOf({ 'a.yaml': sidecar('a'), 'z.yaml': `${sidecar('z')}${envOf('Z', 1001)}` });
    const report = await lintTemplates(dir, PodSecurityLevel.None);
    const blamed = byTemplate(report.faults, 'max-env-per-container');
    assert.deepEqual(Object.keys(blamed), ['z'], JSON.stringify(report.faults));
    assert.ok(blamed['z']!.every((m) => /given this template: 1001 env vars in one container, 1 over/.test(m)));
  });

  it('blames every template of a pair that goes over a limit only together, with what each holds alone', async () => {
    const dir = await dirOf({ 'a.yaml': `${sidecar('a')}${envOf('A', 600)}`, 'b.yaml': `${sidecar('b')}${envOf('B', 500)}`, 'c.yaml': sidecar('c') });
    const report = await lintTemplates(dir, PodSecurityLevel.None);
    const blamed = byTemplate(report.faults, 'max-env-per-container');
    assert.deepEqual(Object.keys(blamed).sort(), ['a', 'b'], JSON.stringify(report.faults));
    for (const [template, other] of [
      ['a', 'b'],
      ['b', 'a'],
    ] as const) {
      assert.deepEqual(blamed[template]!.length, 1);
      assert.match(
        blamed[template]![0]!,
        new RegExp(
          `^with template "${other}", injected into sample pod "deployment-pod", the validating webhook would refuse every pod given them together: 1100 env vars in one container, 100 over --max-env-per-container \\(1000\\), which no template does alone \\("a" alone 600, "b" alone 500\\): the pod has 1100 env vars`,
        ),
      );
    }
  });

  it('warns about templates whose injected pod makes a review over a body limit of serve, counted as the server counts', async () => {
    // List items in a container's args, each a JSON node: 26 000 in each template, 52 000 together.
    const args = (prefix: string, n: number): string => `      args: [${Array.from({ length: n }, (_, i) => `${prefix}${i}`).join(', ')}]\n`;
    const dir = await dirOf({
      'a.yaml': `${sidecar('a')}${args('a', 26_000)}`,
      'b.yaml': `${sidecar('b')}${args('b', 26_000)}`,
      'c.yaml': `${sidecar('c')}${args('c', 50_000)}`,
    });
    const report = await lintTemplates(dir, PodSecurityLevel.None);
    const blamed = byTemplate(report.faults, 'max-json-nodes');
    assert.deepEqual(Object.keys(blamed).sort(), ['a', 'b', 'c'], JSON.stringify(report.faults.map((f) => f.message)));
    // "c" alone, on each sample pod; never in its pairs, where it is the one to blame.
    assert.equal(blamed['c']!.length, 3);
    assert.ok(
      blamed['c']!.every((m) =>
        /given this template: 50\d\d\d JSON nodes in the review, \d+ over --max-json-nodes \(49152\): not a valid AdmissionReview: the body holds more than 49152 JSON nodes/.test(
          m,
        ),
      ),
      blamed['c']!.join('\n'),
    );
    assert.equal(blamed['a']!.length, 1);
    assert.match(
      blamed['a']![0]!,
      /^with template "b", .* given them together: 52\d\d\d JSON nodes in the review, \d+ over --max-json-nodes \(49152\), which no template does alone \("a" alone 26\d\d\d, "b" alone 26\d\d\d\)/,
    );
  });

  it('warns about a pair whose patch goes over --max-patch-kib, which the mutating webhook denies', async () => {
    const long = (n: number): string => `      args: ["${'x'.repeat(n)}"]\n`;
    const dir = await dirOf({ 'a.yaml': `${sidecar('a')}${long(600_000)}`, 'b.yaml': `${sidecar('b')}${long(600_000)}` });
    const report = await lintTemplates(dir, PodSecurityLevel.None);
    const blamed = byTemplate(report.faults, 'max-patch-kib');
    assert.deepEqual(Object.keys(blamed).sort(), ['a', 'b'], JSON.stringify(report.faults.map((f) => f.message.slice(0, 200))));
    assert.match(
      blamed['b']![0]!,
      /^with template "a", .* the mutating webhook would refuse every pod given them together: 12\d{5} bytes of JSON patch, \d+ over --max-patch-kib \(1024 KiB\), which no template does alone \("a" alone 60\d{4}, "b" alone 60\d{4}\): the patch that injects the sidecars would be 12\d{5} bytes, over the limit of 1048576 \(--max-patch-kib\)/,
    );
  });

  it("blames both templates of a pair whose injection is denied only together (annotations over Kubernetes' 256 KiB)", async () => {
    const annotation = (key: string): string => `  annotations:\n    example.com/${key}: "${'x'.repeat(150_000)}"\n`;
    const dir = await dirOf({ 'a.yaml': `${sidecar('a')}${annotation('a')}`, 'b.yaml': `${sidecar('b')}${annotation('b')}` });
    const report = await lintTemplates(dir, PodSecurityLevel.None);
    const denied = report.faults.filter((f) => /annotations would take \d+ bytes once injected/.test(f.message));
    assert.deepEqual(denied.map((f) => f.template).sort(), ['a', 'b'], JSON.stringify(report.faults.map((f) => f.message.slice(0, 200))));
    assert.ok(
      denied.every((f) =>
        /^with template "[ab]", injected into sample pod "deployment-pod", the mutating webhook would refuse every pod given them together, which no template does alone: /.test(
          f.message,
        ),
      ),
    );
  });

  it('warns about a regular sidecar in Job pods, and not about a native one', async () => {
    const regular = await dirOf({ 'a.yaml': `${head('a')}  containers:\n    - name: agent\n      image: registry.example.com/a:1\n` });
    const report = await lintTemplates(regular, PodSecurityLevel.None);
    assert.ok(
      report.faults.some((f) => f.severity === Severity.Warning && /as a regular container to a Job.s pod, which then never completes/.test(f.message)),
    );
    const native = await dirOf({ 'a.yaml': sidecar('a') });
    assert.deepEqual((await lintTemplates(native, PodSecurityLevel.None)).faults, []);
  });
});
