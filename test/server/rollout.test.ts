import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { admit, validatePod } from '../helpers/apiserver.js';
import { optedInPod } from '../helpers/review.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

// Two replicas of the injector behind one Service, each with its own copy of the templates
// ConfigMap, which the kubelet updates a minute or two apart: the apiserver may call /mutate on one
// and /validate on the other. The new version moves the image to another registry
// (k8s.gcr.io -> registry.k8s.io), adds a volume and adds a container.

const PROXY = `apiVersion: sidecar-injector.io/v1alpha1
kind: SidecarTemplate
metadata:
  name: proxy
spec:
  nativeSidecar: true
  containers:
    - name: proxy
      image: envoyproxy/envoy:v1.31.0
`;

/**
 * The log-shipper template at one version: the registry its images come from, and whether it has
 * the config volume and the forwarder container the new version adds.
 */
function logShipper({ registry, config = false, forwarder = false }: { registry: string; config?: boolean; forwarder?: boolean }): string {
  const configMount = config ? '        - { name: shipper-config, mountPath: /etc/shipper }\n' : '';
  const forwarderContainer = forwarder ? `    - name: log-forwarder\n      image: ${registry}/fluent-forwarder:1.0\n` : '';
  const configVolume = config ? '    - name: shipper-config\n      emptyDir: {}\n' : '';
  return `apiVersion: sidecar-injector.io/v1alpha1
kind: SidecarTemplate
metadata:
  name: log-shipper
spec:
  default: true
  containers:
    - name: log-shipper
      image: ${registry}/fluent-bit:3.1
      volumeMounts:
        - { name: app-logs, mountPath: /var/log/app }
${configMount}${forwarderContainer}  volumes:
    - name: app-logs
      emptyDir: {}
${configVolume}`;
}

const OLD = logShipper({ registry: 'k8s.gcr.io' });
const NEW = logShipper({ registry: 'registry.k8s.io', config: true, forwarder: true });
/** The same change without the added container: what a replica that never served OLD can vouch for. */
const MOVED = logShipper({ registry: 'registry.k8s.io', config: true });

async function templatesDir(logShipper: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'rollout-'));
  await writeFile(join(dir, 'log-shipper.yaml'), logShipper);
  await writeFile(join(dir, 'proxy.yaml'), PROXY);
  return dir;
}

const names = (list: any[] | undefined): string[] => (list ?? []).map((c) => c.name);
const status = (pod: any): any => JSON.parse(pod.metadata.annotations['sidecar-injector.io/status']);
const pod = (templates?: string): any => optedInPod(templates === undefined ? {} : { annotations: { 'sidecar-injector.io/templates': templates } });

/** Polls until the server injects the image it should have after a reload (a few seconds at most). */
async function until(server: TestServer, ca: string, image: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const { pod: out } = await admit(server.url, ca, pod());
    if (out.spec.containers.some((c: any) => c.image === image)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail(`the server never served ${image}`);
}

describe('a template rollout across two replicas', () => {
  let a: TestServer; // keeps the old templates
  let b: TestServer; // gets the new ones first
  let ca: string;
  const dirs: string[] = [];
  before(async () => {
    const dirA = await templatesDir(OLD);
    const dirB = await templatesDir(OLD);
    dirs.push(dirA, dirB);
    a = await startTestServer(['--templates-dir', dirA, '--templates-poll-seconds', '1']);
    b = await startTestServer(['--templates-dir', dirB, '--templates-poll-seconds', '1']);
    // Both replicas verify the same certificate chain in a cluster; here each made its own CA.
    ca = `${a.certs.ca.certPem}\n${b.certs.ca.certPem}`;
    await writeFile(join(dirB, 'log-shipper.yaml'), NEW);
    await until(b, ca, 'registry.k8s.io/fluent-bit:3.1');
  });
  after(async () => {
    await Promise.all([a.close(), b.close()]);
    await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
  });

  it('admits on the new replica a pod the old one injected (the new one remembers the old set)', async () => {
    for (const templates of [undefined, 'log-shipper,proxy']) {
      const { pod: injected } = await admit(a.url, ca, pod(templates));
      assert.equal(injected.spec.containers.find((c: any) => c.name === 'log-shipper').image, 'k8s.gcr.io/fluent-bit:3.1');
      const response = await validatePod(b.url, ca, injected);
      assert.equal(response.allowed, true, response.status?.message);
    }
  });

  it('admits on the old replica a pod the new one injected (a version it never served, held exactly as recorded)', async () => {
    for (const templates of [undefined, 'log-shipper,proxy']) {
      const { pod: injected } = await admit(b.url, ca, pod(templates));
      assert.deepEqual(names(injected.spec.containers), ['web', 'log-shipper', 'log-forwarder']);
      assert.deepEqual(names(injected.spec.volumes), ['app-logs', 'shipper-config']);
      const response = await validatePod(a.url, ca, injected);
      assert.equal(response.allowed, true, response.status?.message);
    }
  });

  it('counts by reason which step admitted a pod', async () => {
    const metrics = async (s: TestServer): Promise<string> => (await fetch(`${s.healthUrl}/metrics`)).text();
    const count = (text: string, reason: string): number =>
      Number(new RegExp(`sidecar_injector_reviews_total\\{[^}]*endpoint="validate"[^}]*reason="${reason}"[^}]*\\} (\\d+)`).exec(text)?.[1] ?? 0);
    assert.ok(count(await metrics(b), 'earlier-templates') > 0);
    assert.ok(count(await metrics(a), 'recorded-templates') > 0);
  });

  it("still admits each replica's own pods, and proxy (unchanged) is recorded at one version by both", async () => {
    const fromA = (await admit(a.url, ca, pod('log-shipper,proxy'))).pod;
    const fromB = (await admit(b.url, ca, pod('log-shipper,proxy'))).pod;
    assert.equal((await validatePod(a.url, ca, fromA)).allowed, true);
    assert.equal((await validatePod(b.url, ca, fromB)).allowed, true);
    const version = (p: any, t: string): string => status(p).injected.find((r: any) => r.template === t).version;
    assert.equal(version(fromA, 'proxy'), version(fromB, 'proxy'));
    assert.notEqual(version(fromA, 'log-shipper'), version(fromB, 'log-shipper'));
  });

  it('rejects on both replicas a pod whose sidecar was removed after injection', async () => {
    for (const injector of [a, b]) {
      const { pod: injected } = await admit(injector.url, ca, pod('log-shipper,proxy'));
      const noShipper = structuredClone(injected);
      noShipper.spec.containers = noShipper.spec.containers.filter((c: any) => c.name !== 'log-shipper');
      const noProxy = structuredClone(injected);
      noProxy.spec.initContainers = [];
      for (const broken of [noShipper, noProxy]) {
        for (const validator of [a, b]) {
          const response = await validatePod(validator.url, ca, broken);
          assert.equal(response.allowed, false, `${injector.url} -> ${validator.url}`);
          assert.match(response.status.message, /missing: .*"(log-shipper|proxy)"/);
        }
      }
    }
  });

  it('rejects on both replicas a pod whose sidecar image was swapped to another repository', async () => {
    for (const injector of [a, b]) {
      const { pod: injected } = await admit(injector.url, ca, pod());
      injected.spec.containers.find((c: any) => c.name === 'log-shipper').image = 'busybox:1.36';
      for (const validator of [a, b]) assert.equal((await validatePod(validator.url, ca, injected)).allowed, false);
    }
  });

  it('admits a digest pinned by another webhook in the long form of the name', async () => {
    const { pod: injected } = await admit(b.url, ca, pod('proxy'));
    injected.spec.initContainers[0].image = `docker.io/envoyproxy/envoy@sha256:${'ab'.repeat(32)}`;
    for (const validator of [a, b]) assert.equal((await validatePod(validator.url, ca, injected)).allowed, true);
  });

  it('replaces a status the pod came with by what /mutate injected', async () => {
    const forged = { templates: ['log-shipper'], injected: [{ template: 'log-shipper', version: 'f0f0f0f0f0f0f0f0' }] };
    const { pod: injected } = await admit(a.url, ca, optedInPod({ annotations: { 'sidecar-injector.io/status': JSON.stringify(forged) } }));
    assert.notEqual(status(injected).injected[0].version, 'f0f0f0f0f0f0f0f0');
    assert.deepEqual(Object.keys(status(injected).injected[0].containers), ['log-shipper']);
  });

  describe('a status written by the pod (a /mutate call that failed open)', () => {
    const forgedPod = (containers: object[], record: object): any => {
      const p = optedInPod({
        annotations: { 'sidecar-injector.io/status': JSON.stringify({ templates: ['log-shipper'], injected: [{ template: 'log-shipper', ...record }] }) },
      });
      p.spec.containers.push(...containers);
      return p;
    };

    it('never vouches for a sidecar that is not in the pod', async () => {
      for (const record of [{ version: 'f0f0f0f0f0f0f0f0' }, { version: 'f0f0f0f0f0f0f0f0', containers: { other: 'docker.io/library/busybox' } }]) {
        const p = forgedPod(record.containers === undefined ? [] : [{ name: 'other', image: 'busybox' }], record);
        for (const validator of [a, b]) assert.equal((await validatePod(validator.url, ca, p)).allowed, false, JSON.stringify(record));
      }
    });

    it('never vouches for what the pod does not hold as recorded', async () => {
      const p = forgedPod([{ name: 'log-shipper', image: 'busybox' }], {
        version: 'f0f0f0f0f0f0f0f0',
        containers: { 'log-shipper': 'registry.k8s.io/fluent-bit' },
      });
      for (const validator of [a, b]) assert.equal((await validatePod(validator.url, ca, p)).allowed, false);
    });

    it('never vouches with a version the replica served: that version is checked in full', async () => {
      const { pod: injected } = await admit(a.url, ca, pod());
      const version = status(injected).injected[0].version;
      const p = forgedPod([{ name: 'log-shipper', image: 'busybox' }], { version, containers: { 'log-shipper': 'docker.io/library/busybox' } });
      for (const validator of [a, b]) assert.equal((await validatePod(validator.url, ca, p)).allowed, false);
    });

    it('never lets a version never served lend its trust to a version served here', async () => {
      const { pod: injected } = await admit(a.url, ca, pod());
      const version = status(injected).injected[0].version;
      const p = optedInPod({
        annotations: {
          'sidecar-injector.io/status': JSON.stringify({
            templates: ['log-shipper'],
            injected: [
              { template: 'log-shipper', version, containers: { 'log-shipper': 'docker.io/library/busybox' } },
              { template: 'extra', version: 'f0f0f0f0f0f0f0f0' },
            ],
          }),
        },
      });
      p.spec.containers.push({ name: 'log-shipper', image: 'busybox' });
      for (const validator of [a, b]) assert.equal((await validatePod(validator.url, ca, p)).allowed, false);
    });

    it('vouches, as the README says, for a sidecar of the right name held as recorded under a version never served', async () => {
      const p = forgedPod(
        [
          { name: 'log-shipper', image: 'busybox' },
          { name: 'log-forwarder', image: 'busybox' },
        ],
        {
          version: 'f0f0f0f0f0f0f0f0',
          containers: { 'log-shipper': 'docker.io/library/busybox', 'log-forwarder': 'docker.io/library/busybox' },
        },
      );
      for (const validator of [a, b]) assert.equal((await validatePod(validator.url, ca, p)).allowed, true);
    });
  });
});

describe('an upgrade of the injector itself', () => {
  let fresh: TestServer; // a new replica started after the templates changed: it never served OLD
  let strict: TestServer; // the same, with --template-history-minutes 0
  let old: TestServer; // stands in for a replica on the old templates
  let ca: string;
  const dirs: string[] = [];
  before(async () => {
    const [moved, original] = [await templatesDir(MOVED), await templatesDir(OLD)];
    dirs.push(moved, original);
    fresh = await startTestServer(['--templates-dir', moved]);
    strict = await startTestServer(['--templates-dir', moved, '--template-history-minutes', '0']);
    old = await startTestServer(['--templates-dir', original]);
    ca = [fresh, strict, old].map((s) => s.certs.ca.certPem).join('\n');
  });
  after(async () => {
    await Promise.all([fresh.close(), strict.close(), old.close()]);
    await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
  });

  /** A pod as the previous release injected it: its status has template names and a digest, no versions. */
  async function fromPreviousRelease(): Promise<any> {
    const { pod: injected } = await admit(old.url, ca, pod());
    injected.metadata.annotations['sidecar-injector.io/status'] = '{"templates":["log-shipper"],"digest":"7a58c114437aeb57"}';
    return injected;
  }

  it("admits a pod with the previous release's status after a registry move and an added volume", async () => {
    const response = await validatePod(fresh.url, ca, await fromPreviousRelease());
    assert.equal(response.allowed, true, response.status?.message);
  });

  it("admits a pod with the previous release's status when the templates did not change", async () => {
    const { pod: same } = await admit(fresh.url, ca, pod());
    same.metadata.annotations['sidecar-injector.io/status'] = '{"templates":["log-shipper"],"digest":"7a58c114437aeb57"}';
    assert.equal((await validatePod(strict.url, ca, same)).allowed, true);
  });

  it('admits, on a replica that never served the old version, a pod recorded at it', async () => {
    const { pod: injected } = await admit(old.url, ca, pod());
    for (const validator of [fresh, strict]) assert.equal((await validatePod(validator.url, ca, injected)).allowed, true);
  });

  it("stops trusting the previous release's status after the window (0 here)", async () => {
    const response = await validatePod(strict.url, ca, await fromPreviousRelease());
    assert.equal(response.allowed, false);
    assert.match(response.status.message, /image repository registry\.k8s\.io\/fluent-bit/);
  });

  it('rejects a previous-release status whose pod lacks a sidecar of the current set', async () => {
    const injected = await fromPreviousRelease();
    injected.spec.containers = injected.spec.containers.filter((c: any) => c.name !== 'log-shipper');
    assert.equal((await validatePod(fresh.url, ca, injected)).allowed, false);
  });
});
