import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, request, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { findKubeadmit, mapLimit } from '../helpers/kubeadmit.js';
import { kustomizeObjects } from '../manifests/render.js';
import { appPod, assertInjected, containerNames, INJECT, paths, status } from './cases.js';
import { startInstall, writeConfigurations, type RunningInstall } from './install.js';

/**
 * The kustomize base install (its injector started as the image starts it) through the
 * kube-apiserver's admission code (kubeadmit): reinvocation by a later webhook, dry run, a
 * v1beta1-only configuration, controller pods with only generateName, a pod near the apiserver's
 * request limit, and the failures a user meets, with the exact text kubectl prints for each.
 */
const found = findKubeadmit();
const skip = 'skip' in found ? found.skip : false;
const binary = 'binary' in found ? found.binary : '';

const OPTED_IN = { shop: { labels: { [INJECT]: 'true' } } };
const inShop = (object: object, extra: object = {}) => ({ namespace: 'shop', namespaces: OPTED_IN, object, ...extra });

/**
 * A stand-in in front of the injector, with its certificate: /mutate* requests are held `holdMs`
 * before they are passed on, or (holdMs undefined) their connection is reset; /validate* passes at
 * once. An injector whose mutating side is down or slow while its validating side answers.
 */
async function frontMutate(running: RunningInstall, holdMs: number | undefined): Promise<{ addr: string; close: () => Promise<void> }> {
  const server: Server = createServer({ cert: running.serving.certPem, key: running.serving.keyPem }, (req, res) => {
    if (req.url?.startsWith('/mutate') && holdMs === undefined) return void req.socket.destroy();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const pass = (): void => {
        const upstream = request(
          { host: '127.0.0.1', port: running.port, servername: running.dnsName, ca: running.caPem, method: req.method, path: req.url, headers: req.headers },
          (answer) => {
            res.writeHead(answer.statusCode ?? 502, answer.headers);
            answer.pipe(res);
          },
        );
        upstream.on('error', () => res.destroy());
        upstream.end(Buffer.concat(chunks));
      };
      if (req.url?.startsWith('/mutate')) setTimeout(pass, holdMs).unref();
      else pass();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    addr: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe('one pod CREATE through the apiserver admission code (kubeadmit), kustomize manifests/base', { skip }, () => {
  let running: RunningInstall;
  before(async () => (running = await startInstall(binary, kustomizeObjects('base'))));
  after(() => running?.close());

  describe('reinvocation: a mutating webhook after the injector (an interloper)', () => {
    const label = [{ op: 'add', path: '/metadata/labels/touched', value: 'yes' }];
    const removeSidecar = [{ op: 'remove', path: '/spec/containers/1' }];

    it('changing the pod in the first round only: the injector is called again and adds nothing', async () => {
      const res = await running.admit(inShop(appPod(), { interlopers: [{ patch: label }] }));
      assertInjected(res);
      assert.deepEqual(
        res.calls.map((c) => [c.interloper ? 'interloper' : c.path, c.patchOps]),
        [
          ['/mutate/namespace', 5],
          ['interloper', 1],
          ['/mutate/namespace', 0],
          ['/validate/namespace', 0],
        ],
      );
      assert.equal(res.object.metadata.labels.touched, 'yes');
      assert.deepEqual(containerNames(res), ['app', 'log-shipper']);
    });

    it('changing it in every round: the same, and the apiserver stops after one reinvocation', async () => {
      const res = await running.admit(inShop(appPod(), { interlopers: [{ patch: label, everyRound: true }] }));
      assertInjected(res);
      assert.deepEqual(containerNames(res), ['app', 'log-shipper']);
    });

    it('removing the sidecar in the first round only: the reinvoked injector puts it back', async () => {
      const res = await running.admit(inShop(appPod(), { interlopers: [{ patch: removeSidecar }] }));
      assertInjected(res);
      assert.deepEqual(containerNames(res), ['app', 'log-shipper']);
    });

    it('removing the sidecar in every round: the validator refuses the pod, naming the sidecar', async () => {
      const res = await running.admit(inShop(appPod(), { interlopers: [{ patch: removeSidecar, everyRound: true }] }));
      assert.equal(res.allowed, false);
      assert.equal(res.stage, 'validating');
      assert.equal(res.code, 403);
      assert.equal(
        res.reason,
        'admission webhook "namespace.validate.sidecar-injector.io" denied the request: pod opted in to sidecar injection but is missing: container "log-shipper" (template "log-shipper")',
      );
    });
  });

  describe('requests', () => {
    it('a dry run (kubectl create --dry-run=server) is injected like any pod: the webhooks declare sideEffects None', async () => {
      const res = await running.admit(inShop(appPod(), { dryRun: true }));
      assertInjected(res, { scope: 'namespace' });
    });

    it('a configuration that offers only admission.k8s.io/v1beta1 gets v1beta1 answers the apiserver accepts', async () => {
      const v1beta1 = structuredClone(running.configurations);
      for (const c of v1beta1) for (const w of c.webhooks) w.admissionReviewVersions = ['v1beta1'];
      const res = await running.admit(inShop(appPod()), { configs: [await writeConfigurations(v1beta1)] });
      assertInjected(res, { scope: 'namespace' });
      assert.deepEqual(
        res.calls.map((c) => c.version),
        ['v1beta1', 'v1beta1'],
      );
    });

    const owner = (kind: string, name: string) => ({
      apiVersion: kind === 'Job' ? 'batch/v1' : 'apps/v1',
      kind,
      name,
      uid: '5f0d4c1e-93a4-4b55-8d7e-2a9c8e1b7f30',
      controller: true,
      blockOwnerDeletion: true,
    });
    it("controller pods: a ReplicaSet's and a Job's (only generateName) and a StatefulSet's get their sidecars and the apiserver's name", async () => {
      const rs = appPod({ 'pod-template-hash': '7d9f8b6c5' });
      rs.metadata.ownerReferences = [owner('ReplicaSet', 'web-7d9f8b6c5')];
      const job = {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          generateName: 'backup-28391234-',
          labels: { 'batch.kubernetes.io/job-name': 'backup-28391234', 'batch.kubernetes.io/controller-uid': '5f0d4c1e-93a4-4b55-8d7e-2a9c8e1b7f30' },
          ownerReferences: [owner('Job', 'backup-28391234')],
        },
        spec: { restartPolicy: 'Never', containers: [{ name: 'backup', image: 'busybox:1.36' }] },
      };
      const sts = {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          name: 'db-0',
          generateName: 'db-',
          labels: { 'statefulset.kubernetes.io/pod-name': 'db-0', 'apps.kubernetes.io/pod-index': '0' },
          ownerReferences: [owner('StatefulSet', 'db')],
        },
        spec: { hostname: 'db-0', subdomain: 'db', containers: [{ name: 'db', image: 'postgres:17' }] },
      };
      const [r, j, s] = await mapLimit([rs, job, sts], 3, (pod) => running.admit(inShop(pod)));
      assertInjected(r!, { scope: 'namespace' });
      assert.match(r!.object.metadata.name, /^web-7d9f8b6c5-[a-z0-9]{5}$/);
      assertInjected(j!, { scope: 'namespace' });
      assert.match(j!.object.metadata.name, /^backup-28391234-[a-z0-9]{5}$/);
      assert.deepEqual(containerNames(j!), ['init:log-shipper', 'backup'], "in a Job's pod log-shipper is a native sidecar, so the Job completes");
      assertInjected(s!, { scope: 'namespace' });
      assert.equal(s!.object.metadata.name, 'db-0');
    });

    it("a pod near the apiserver's 3 MiB request limit is injected", async () => {
      const pod = appPod();
      // 2.9 MiB of environment: the largest pod a user can send (the apiserver refuses a request over 3 MiB).
      pod.spec.containers[0].env = Array.from({ length: 29 }, (_, i) => ({ name: `BLOB_${i}`, value: 'x'.repeat(100 * 1024 - 20) }));
      assert.ok(JSON.stringify(pod).length > 2.8 * 1024 * 1024 && JSON.stringify(pod).length < 3 * 1024 * 1024);
      const res = await running.admit(inShop(pod));
      assertInjected(res, { scope: 'namespace' });
      assert.equal(res.object.spec.containers[0].env.length, 30, "the pod kept its own env and got the template's LOG_DIR");
    });
  });

  describe('failures a user meets, as kubectl prints them', () => {
    it('a template name the pod asks for that is not installed: refused by the mutating webhook', async () => {
      const res = await running.admit(inShop(appPod({}, { 'sidecar-injector.io/templates': 'log-shipper,tracing' })));
      assert.equal(res.stage, 'mutating');
      assert.equal(res.code, 400);
      assert.equal(
        res.reason,
        'admission webhook "namespace.inject.sidecar-injector.io" denied the request: unknown sidecar template(s) "tracing" named in annotation sidecar-injector.io/templates; known templates: log-shipper, proxy',
      );
    });

    const notInjected =
      'pod opted in to sidecar injection but was never injected (no sidecar-injector.io/status annotation): the injector\'s mutating webhook did not answer for it (down, unreachable or slower than its timeoutSeconds; it fails open); a controller creates the pod again by itself, create a bare pod again once an injector replica is ready; missing: container "log-shipper" (template "log-shipper"); volume "app-logs" (template "log-shipper")';
    for (const [what, holdMs] of [
      ['slower than its timeoutSeconds', 2500],
      ['down (connections reset)', undefined],
    ] as const) {
      it(`the injector's mutating side ${what} while /validate answers: the pod passes /mutate (failurePolicy Ignore) and /validate refuses it`, async () => {
        const front = await frontMutate(running, holdMs);
        try {
          const res = await running.admit(inShop(appPod()), { addr: front.addr, timeout: '1s' });
          assert.equal(res.allowed, false);
          assert.equal(res.calls[0]!.path, '/mutate/namespace');
          assert.ok(res.calls[0]!.error, 'the mutating call failed');
          assert.equal(res.stage, 'validating');
          assert.equal(res.code, 403);
          assert.equal(res.reason, `admission webhook "namespace.validate.sidecar-injector.io" denied the request: ${notInjected}`);
        } finally {
          await front.close();
        }
      });
    }

    it('the injector down altogether: the validating webhook fails closed and the pod is refused, naming it', async () => {
      const [byNamespace, byPod] = await mapLimit([inShop(appPod()), { namespace: 'web', object: appPod({ [INJECT]: 'true' }) }], 2, (s) =>
        running.admit(s, { addr: '127.0.0.1:1' }),
      );
      for (const [res, hook, path] of [
        [byNamespace!, 'namespace.validate.sidecar-injector.io', '/validate/namespace'],
        [byPod!, 'validate.sidecar-injector.io', '/validate'],
      ] as const) {
        assert.equal(res.stage, 'validating');
        assert.equal(res.code, 500);
        assert.equal(
          res.reason,
          `Internal error occurred: failed calling webhook "${hook}": failed to call webhook: Post "https://sidecar-injector.sidecar-injector.svc:443${path}?timeout=5s": dial tcp 127.0.0.1:1: connect: connection refused`,
        );
      }
    });

    it('a pod that is not opted in is created as usual while the injector is down', async () => {
      const res = await running.admit({ namespace: 'web', object: appPod() }, { addr: '127.0.0.1:1' });
      assert.equal(res.allowed, true);
      assert.deepEqual(paths(res), []);
      assert.equal(status(res), undefined);
    });
  });
});
