import assert from 'node:assert/strict';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { cli, golden } from '../helpers/cli.js';

const FIXTURES = 'test/fixtures/cli';

function lint(args: string[]): ReturnType<typeof cli> {
  return cli(['lint', ...args]);
}

describe('sidecar-injector lint', () => {
  it('passes the bundled templates and the CLI fixtures with exit 0', async () => {
    for (const dir of ['templates', `${FIXTURES}/templates`]) {
      const r = await lint([dir]);
      assert.equal(r.code, 0, r.out);
      assert.match(r.out, /template\(s\) OK/);
    }
  });

  it('reports every load fault as an error at file:line:column with the template name, and exits 1', async () => {
    const r = await lint([`${FIXTURES}/lint-load`]);
    assert.equal(r.code, 1);
    await golden('lint-load.txt', r.out);
    const expected = [
      /faults\.yaml:10:24: error: template "misspelled": \/spec\/containers\/0\/imagePullPolicy: must be one of "Always", "IfNotPresent", "Never", got "Sometimes"/,
      /faults\.yaml:17:14: error: template "misplaced": \/spec\/placement: placement must be "first", "last", \{before: CONTAINER\} or \{after: CONTAINER\}, got "middle"/,
      /faults\.yaml:27:22: error: template "overrides-nothing": \/spec\/overrides\/1: must be one of "image", "cpu", "memory", got "replicas"/,
      /faults\.yaml:39:14: error: template "bad-placeholder": \/spec\/containers\/0\/image: unknown placeholder "\{\{ pod\.uid \}\}"/,
      // Every bad placeholder of a template at once, not one per run (issue 21).
      /faults\.yaml:42:18: error: template "bad-placeholder": \/spec\/containers\/0\/env\/0\/value: unknown placeholder "\{\{ pod\.labels\['app'\] \| defualt 'none' \}\}"/,
      /yaml-error\.yaml:9:1: error: YAML: /,
    ];
    for (const e of expected) assert.match(r.out, e);
  });

  it('injects each template into sample pods and reports invalid pods, Pod Security findings and conflicts as warnings at their positions', async () => {
    const r = await lint([`${FIXTURES}/lint-pods`, '--pod-security', 'restricted']);
    assert.equal(r.code, 0, 'warnings alone exit 0');
    await golden('lint-pods.txt', r.out);
    const expected = [
      /metrics-b\.yaml:11:26: warning: .*port 9100\/TCP is defined by both/,
      /metrics-b\.yaml:18:13: warning: .*volume "shared" is defined by both/,
      /privileged\.yaml:11:21: warning: template "privileged": \/spec\/containers\/0\/securityContext\/privileged: .*Pod Security baseline/,
      /privileged\.yaml:14:43: warning: .*capabilities SYS_PTRACE are not allowed/,
      /privileged\.yaml:17:13: warning: template "privileged": \/spec\/volumeMounts\/0\/name: the application containers get a mount of volume "not-defined"/,
    ];
    for (const e of expected) assert.match(r.out, e);
  });

  it('exits 1 on warnings only with --strict', async () => {
    assert.equal((await lint([`${FIXTURES}/lint-pods`])).code, 0);
    assert.equal((await lint([`${FIXTURES}/lint-pods`, '--strict'])).code, 1);
  });

  it('checks Pod Security only at the level chosen with --pod-security (default none)', async () => {
    const none = await lint([`${FIXTURES}/lint-pods`]);
    assert.doesNotMatch(none.out, /Pod Security (baseline|restricted)\)/);
    assert.match(none.out, /not-defined/, 'pod validity is checked at every level');
    const baseline = await lint([`${FIXTURES}/lint-pods`, '--pod-security', 'baseline']);
    assert.doesNotMatch(baseline.out, /Pod Security restricted\)/);
    assert.match(baseline.out, /Pod Security baseline\)/);
    const lax = await lint(['--pod-security', 'lax']);
    assert.equal(lax.code, 2);
    assert.match(lax.err, /argument 'lax' is invalid\. Allowed choices are privileged, baseline, restricted, none/);
  });

  it("takes --pod-security privileged, the Pod Security Standards' own name for no restrictions, as none", async () => {
    const privileged = await lint([`${FIXTURES}/lint-pods`, '--pod-security', 'privileged']);
    const none = await lint([`${FIXTURES}/lint-pods`, '--pod-security', 'none']);
    assert.equal(privileged.code, 0, privileged.err);
    assert.equal(privileged.out, none.out);
    assert.match(privileged.out, /Pod Security privileged\)/);
  });

  it('prints the report as JSON with -o json', async () => {
    const r = await lint([`${FIXTURES}/lint-pods`, '-o', 'json']);
    const report = JSON.parse(r.out);
    assert.deepEqual(report.templates, ['metrics-a', 'metrics-b', 'privileged']);
    assert.ok(report.faults.every((f: any) => typeof f.line === 'number' && typeof f.file === 'string' && f.severity === 'warning'));
    assert.equal(report.errors, 0);
  });

  it('fails a directory without templates, and one that does not exist', async () => {
    const empty = await mkdtemp(join(tmpdir(), 'lint-empty-'));
    const r = await lint([empty]);
    assert.equal(r.code, 1);
    assert.match(r.out, /no sidecar templates \(\*\.yaml, \*\.yml\) found in/);
    const missing = await lint([`${FIXTURES}/no-such-dir`]);
    assert.equal(missing.code, 1);
    assert.equal(
      missing.err,
      `sidecar-injector: cannot read ${FIXTURES}/no-such-dir: no such directory; give lint the directory of SidecarTemplate YAML files (lint DIR)\n`,
    );
    const file = await lint([`${FIXTURES}/explain.yaml`]);
    assert.match(file.err, /^sidecar-injector: cannot read .*explain\.yaml: not a directory; give lint the directory/);
  });
});
