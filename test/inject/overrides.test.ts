import assert from 'node:assert/strict';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { renderTemplates } from '../../src/inject/render.js';
import { admit, validatePod } from '../helpers/apiserver.js';
import { optedInPod } from '../helpers/review.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { set, template } from '../helpers/templates.js';

// Issue 10 item 1: a template `log-shipper` whose own annotations hold
// `log-shipper.sidecar-injector.io/version` denied every opted-in pod.
const LOG_SHIPPER = `apiVersion: sidecar-injector.io/v1alpha1
kind: SidecarTemplate
metadata:
  name: log-shipper
spec:
  default: true
  overrides: [cpu]
  containers:
    - name: log-shipper
      image: cr.fluentbit.io/fluent/fluent-bit:3.1
      env:
        - name: LOG_LEVEL
          value: "{{ pod.annotations['log-shipper.sidecar-injector.io/level'] | default 'info' }}"
  annotations:
    log-shipper.sidecar-injector.io/version: "3.1"
`;

let server: TestServer;
let ca: string;
before(async () => {
  const dir = await mkdtemp(join(tmpdir(), 'overrides-'));
  await writeFile(join(dir, 'log-shipper.yaml'), LOG_SHIPPER);
  server = await startTestServer(['--templates-dir', dir]);
  ca = server.certs.ca.certPem;
});
after(() => server.close());

describe("annotations under a template's prefix, through the server", () => {
  it('injects a template that sets its own prefixed annotation, and validates the pod, without a warning', async () => {
    const { response, pod } = await admit(server.url, ca, optedInPod({ annotations: { 'log-shipper.sidecar-injector.io/level': 'debug' } }));
    assert.equal(response.allowed, true, response.status?.message);
    assert.equal(response.warnings, undefined);
    assert.equal(pod.metadata.annotations['log-shipper.sidecar-injector.io/version'], '3.1');
    assert.equal(pod.spec.containers[1].env[0].value, 'debug');
    assert.equal((await validatePod(server.url, ca, pod)).allowed, true);
    const again = await admit(server.url, ca, pod);
    assert.equal(again.response.patch, undefined);
    assert.equal(again.response.warnings, undefined);
  });

  it("admits a pod that sets the template's annotation to another value (the pod's wins)", async () => {
    const { response, pod } = await admit(server.url, ca, optedInPod({ annotations: { 'log-shipper.sidecar-injector.io/version': '2.0' } }));
    assert.equal(response.allowed, true, response.status?.message);
    assert.equal(pod.metadata.annotations['log-shipper.sidecar-injector.io/version'], '2.0');
    assert.equal((await validatePod(server.url, ca, pod)).allowed, true);
  });

  it('warns of unknown keys and of overrides the template does not allow, and injects anyway', async () => {
    const annotations = { 'log-shipper.sidecar-injector.io/memroy': '1Gi', 'log-shipper.sidecar-injector.io/image': 'evil.example.com/x:1' };
    const { response, pod } = await admit(server.url, ca, optedInPod({ annotations }));
    assert.equal(response.allowed, true, response.status?.message);
    assert.deepEqual(response.warnings, [
      'annotation log-shipper.sidecar-injector.io/memroy: "memroy" is not an override field (image, cpu, memory) and template "log-shipper" does not read it; ignored',
      'annotation log-shipper.sidecar-injector.io/image: template "log-shipper" does not allow overriding image (it allows cpu); ignored',
    ]);
    assert.equal(pod.spec.containers[1].image, 'cr.fluentbit.io/fluent/fluent-bit:3.1');
    const validated = await validatePod(server.url, ca, pod);
    assert.equal(validated.allowed, true);
  });

  it('still refuses an invalid value of an allowed override, in both handlers', async () => {
    const pod = optedInPod({ annotations: { 'log-shipper.sidecar-injector.io/cpu': 'lots' } });
    const { response } = await admit(server.url, ca, pod);
    assert.equal(response.allowed, false);
    assert.match(response.status.message, /annotation log-shipper.sidecar-injector.io\/cpu: "lots" is not a Kubernetes quantity/);
    assert.equal((await validatePod(server.url, ca, pod)).allowed, false);
  });
});

describe("a cpu or memory override and the template's limit", () => {
  const limited = (limits: string) =>
    set(
      template(
        'big',
        `  overrides: [cpu, memory]
  containers:
    - name: big
      image: registry.example.com/big:1.0
      resources:
        limits: ${limits}
`,
      ),
    ).templates.get('big')!;
  const render = (limits: string, annotations: Record<string, string>) =>
    renderTemplates(optedInPod({ annotations }), [limited(limits)], 'default')[0]!.containers[0]!['resources'];

  it('raises a limit exactly below the request, however close (a double reads 2^53 + 1 bytes as 8Pi)', () => {
    assert.deepEqual(render('{ memory: 8Pi }', { 'big.sidecar-injector.io/memory': '9007199254740993' }), {
      requests: { memory: '9007199254740993' },
      limits: { memory: '9007199254740993' },
    });
  });

  it('keeps a limit equal to the request however each is written', () => {
    assert.deepEqual(render('{ cpu: "0.009", memory: 1Gi }', { 'big.sidecar-injector.io/cpu': '9m', 'big.sidecar-injector.io/memory': '1073741824' }), {
      requests: { cpu: '9m', memory: '1073741824' },
      limits: { cpu: '0.009', memory: '1Gi' },
    });
  });
});
