import assert from 'node:assert/strict';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { jobCompletionWarning, keepsJobsRunning } from '../../src/inject/jobs.js';
import { renderTemplates } from '../../src/inject/render.js';
import { compileTemplateSet, loadTemplateSet, type TemplateSet } from '../../src/templates/load.js';
import { admit, validatePod } from '../helpers/apiserver.js';
import { optedInPod } from '../helpers/review.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const jobOwner = [{ apiVersion: 'batch/v1', kind: 'Job', name: 'nightly-28811520', uid: 'u', controller: true }];

function templateSet(nativeSidecar: string): TemplateSet {
  const text = `apiVersion: sidecar-injector.io/v1alpha1
kind: SidecarTemplate
metadata:
  name: agent
spec:
  default: true
${nativeSidecar}  containers:
    - name: agent
      image: registry.example.com/agent:1.0
`;
  return compileTemplateSet([{ file: 'agent.yaml', text }], 'test');
}

function jobPod(): any {
  const pod = optedInPod();
  pod.metadata.ownerReferences = jobOwner;
  pod.spec.restartPolicy = 'Never';
  return pod;
}

describe('Jobs complete', () => {
  it('tells lint which templates keep Jobs running, and the warning for a rendering', () => {
    assert.equal(keepsJobsRunning(templateSet('').templates.get('agent')!), true);
    assert.equal(keepsJobsRunning(templateSet('  nativeSidecar: jobs\n').templates.get('agent')!), false);
    const set = templateSet('');
    const [rendered] = renderTemplates(jobPod(), [...set.defaults], 'default', { ownedByJob: true });
    assert.match(jobCompletionWarning(rendered!) ?? '', /never completes/);
  });

  it("makes every bundled template a native sidecar in a Job's pod", async () => {
    for (const dir of ['templates', 'manifests/base/templates', 'charts/sidecar-injector/files/templates']) {
      const set = await loadTemplateSet(dir);
      for (const t of set.templates.values()) {
        assert.equal(keepsJobsRunning(t), false, `${dir}: ${t.name}`);
        const [r] = renderTemplates(jobPod(), [t], 'default');
        assert.equal(r!.nativeSidecar, true, `${dir}: ${t.name}`);
        assert.ok(r!.containers.every((c) => c.restartPolicy === 'Always'));
      }
    }
  });
});

describe('Jobs complete, through the server', () => {
  let bundled: TestServer;
  let regular: TestServer;
  before(async () => {
    bundled = await startTestServer();
    const dir = await mkdtemp(join(tmpdir(), 'jobs-'));
    await writeFile(
      join(dir, 'agent.yaml'),
      `apiVersion: sidecar-injector.io/v1alpha1
kind: SidecarTemplate
metadata:
  name: agent
spec:
  default: true
  containers:
    - name: agent
      image: registry.example.com/agent:1.0
`,
    );
    regular = await startTestServer(['--templates-dir', dir]);
  });
  after(async () => {
    await bundled.close();
    await regular.close();
  });

  it("injects the bundled templates into a Job's pod as native sidecars only, which the validator admits", async () => {
    const pod = jobPod();
    pod.metadata.annotations = { 'sidecar-injector.io/templates': 'log-shipper,proxy' };
    const { response, pod: out } = await admit(bundled.url, bundled.certs.ca.certPem, pod);
    assert.equal(response.allowed, true, response.status?.message);
    assert.equal(response.warnings, undefined);
    assert.deepEqual(
      out.spec.containers.map((c: any) => c.name),
      ['web'],
      "no regular container but the Job's own",
    );
    assert.deepEqual(
      out.spec.initContainers.map((c: any) => [c.name, c.restartPolicy]),
      [
        ['log-shipper', 'Always'],
        ['proxy', 'Always'],
      ],
    );
    assert.equal((await validatePod(bundled.url, bundled.certs.ca.certPem, out)).allowed, true);
  });

  it('keeps the bundled log shipper an ordinary container outside Jobs', async () => {
    const { pod } = await admit(bundled.url, bundled.certs.ca.certPem, optedInPod());
    assert.deepEqual(
      pod.spec.containers.map((c: any) => c.name),
      ['web', 'log-shipper'],
    );
  });

  it("warns in the AdmissionResponse of a regular sidecar in a Job's pod", async () => {
    const { response } = await admit(regular.url, regular.certs.ca.certPem, jobPod());
    assert.equal(response.allowed, true);
    assert.equal(response.warnings.length, 1);
    assert.match(response.warnings[0], /template "agent" adds "agent" as a regular container to a Job's pod, which then never completes/);
  });
});
