import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parseImageMirrors, type ImageMirrors } from '../../src/kube-values/image.js';
import { injectSidecars } from '../../src/inject/mutate.js';
import { Reason, selectTemplates } from '../../src/inject/policy.js';
import { verifyPod } from '../../src/inject/verify.js';
import { SetHistory } from '../../src/templates/history.js';
import type { TemplateSet } from '../../src/templates/load.js';
import { optedInPod } from '../helpers/review.js';
import { set, template } from '../helpers/templates.js';

const shipper = (image: string, extra = ''): string =>
  template('shipper', `  default: true\n${extra}  containers:\n    - name: shipper\n      image: ${image}\n`);
const mesh = (extra = ''): string =>
  template('mesh', `${extra}  nativeSidecar: true\n  containers:\n    - name: proxy\n      image: envoyproxy/envoy:v1.31.0\n`);

/** /mutate's work on a pod under one set. */
function inject(s: TemplateSet, annotations: Record<string, string> = {}): any {
  const pod = optedInPod({ annotations });
  const selection = selectTemplates(pod, s);
  assert.ok(selection.inject);
  return structuredClone(injectSidecars(pod, selection.templates, 'default').pod);
}

/** A replica that served `served` in turn and now serves the last of them. */
function replica(served: readonly TemplateSet[], onUnknownVersion?: () => void): TemplateSet {
  const history = new SetHistory(served[0]!, { windowMs: 60_000, ...(onUnknownVersion !== undefined && { onUnknownVersion }) });
  for (const s of served.slice(1)) history.replace(s);
  return history.current();
}

const verdictOf = (pod: any, s: TemplateSet): { kind: string; reason: string } => {
  const v = verifyPod(pod, s, 'default');
  return { kind: v.kind, reason: v.reason };
};

describe('verifyPod', () => {
  const v1 = set(shipper('k8s.gcr.io/shipper:1'), mesh());
  const v2 = set(shipper('registry.k8s.io/shipper:1'), mesh());

  it('admits by the current set first', () => {
    assert.deepEqual(verdictOf(inject(v2), replica([v1, v2])), { kind: 'allowed', reason: Reason.SidecarsPresent });
  });

  it('admits by a set served within the window, and says so', () => {
    assert.deepEqual(verdictOf(inject(v1), replica([v1, v2])), { kind: 'allowed', reason: Reason.EarlierTemplates });
  });

  it('admits by the record a pod injected with a version never served here, and asks for a re-read', () => {
    let asked = 0;
    assert.deepEqual(
      verdictOf(
        inject(v2),
        replica([v1], () => asked++),
      ),
      { kind: 'allowed', reason: Reason.RecordedTemplates },
    );
    assert.equal(asked, 1);
  });

  it('without a history (the CLI) vouches by the record only for versions outside the set', () => {
    assert.deepEqual(verdictOf(inject(v2), v1), { kind: 'allowed', reason: Reason.RecordedTemplates });
    const forged = inject(v1);
    forged.spec.containers[1].image = 'busybox';
    assert.equal(verifyPod(forged, v1, 'default').kind, 'denied');
  });

  it('admits a pod injected when a default was added, where the replica remembers the set without it', () => {
    const withMesh = set(shipper('k8s.gcr.io/shipper:1'), mesh('  default: true\n'));
    const pod = inject(v1);
    assert.deepEqual(verdictOf(pod, replica([v1, withMesh])), { kind: 'allowed', reason: Reason.EarlierTemplates });
    // A replica that never served v1 must see every sidecar it would inject.
    const fresh = verifyPod(pod, replica([withMesh]), 'default');
    assert.equal(fresh.kind, 'denied');
    assert.ok(fresh.kind === 'denied' && /native sidecar "proxy"/.test(fresh.error.message));
  });

  it('admits a pod naming a template this replica does not have yet, recorded at a version it never served', () => {
    const withAgent = set(shipper('k8s.gcr.io/shipper:1'), mesh(), template('agent', '  containers:\n    - name: agent\n      image: agent:1\n'));
    const pod = inject(withAgent, { 'sidecar-injector.io/templates': 'shipper,agent' });
    assert.deepEqual(verdictOf(pod, replica([v1])), { kind: 'allowed', reason: Reason.RecordedTemplates });
    pod.spec.containers = pod.spec.containers.filter((c: any) => c.name !== 'agent');
    assert.deepEqual(verdictOf(pod, replica([v1])), { kind: 'denied', reason: Reason.UnknownTemplate });
  });

  it('admits an override that only the newer version allows', () => {
    const open = set(shipper('k8s.gcr.io/shipper:1', '  overrides: [image]\n'), mesh());
    const pod = inject(open, { 'shipper.sidecar-injector.io/image': 'registry.example.com/shipper:2' });
    assert.equal(pod.spec.containers[1].image, 'registry.example.com/shipper:2');
    assert.deepEqual(verdictOf(pod, replica([v1])), { kind: 'allowed', reason: Reason.RecordedTemplates });
  });

  it("gives the current set's denial when nothing admits the pod", () => {
    const pod = inject(v1);
    pod.spec.containers.pop();
    const v = verifyPod(pod, replica([v1, v2]), 'default');
    assert.ok(v.kind === 'denied');
    assert.equal(v.reason, Reason.SidecarsMissing);
    assert.match(v.error.message, /missing: container "shipper" \(template "shipper"\)/);
    assert.deepEqual(v.templates, ['shipper']);
  });

  it("admits the previous release's status by names only within the window after start", () => {
    const pod = inject(v1);
    pod.metadata.annotations['sidecar-injector.io/status'] = '{"templates":["shipper"],"digest":"7a58c114437aeb57"}';
    assert.deepEqual(verdictOf(pod, replica([v2])), { kind: 'allowed', reason: Reason.UnversionedStatus });
    assert.equal(verifyPod(pod, v2, 'default').kind, 'denied', 'no history (the CLI): no window');
    pod.metadata.annotations['sidecar-injector.io/status'] = '{"templates":[],"digest":"7a58c114437aeb57"}';
    assert.equal(verifyPod(pod, replica([v2]), 'default').kind, 'denied', 'the status must name the template');
  });

  it('skips pods that did not opt in, whatever their status says', () => {
    const pod = inject(v1);
    pod.metadata.labels['sidecar-injector.io/inject'] = 'false';
    assert.deepEqual(verdictOf(pod, replica([v2])), { kind: 'skipped', reason: Reason.OptedOut });
  });
});

describe('the sidecars looked up in pods of few and of many containers', () => {
  const s = set(shipper('registry.example.com/shipper:1'));
  for (const apps of [1, 40]) {
    const pod = (sidecars: readonly string[]): any => {
      const p = optedInPod();
      const own = Array.from({ length: apps }, (_, i) => ({ name: `app-${i}`, image: 'nginx:1.27' }));
      return { ...p, spec: { ...p.spec, containers: [...sidecars.map((image) => ({ name: 'shipper', image })), ...own] } };
    };
    it(`judges the last container of a name, as the apiserver would see a duplicate (${apps} application containers)`, () => {
      assert.equal(verdictOf(pod(['registry.example.com/shipper:2']), s).kind, 'allowed');
      assert.equal(verdictOf(pod(['registry.example.com/shipper:2', 'registry.example.com/other:1']), s).kind, 'denied');
      assert.equal(verdictOf(pod(['registry.example.com/other:1', 'registry.example.com/shipper:2']), s).kind, 'allowed');
      assert.equal(verdictOf(pod([]), s).reason, Reason.SidecarsMissing);
    });
  }
});

describe('verifyPod with registry mirrors', () => {
  const parsed = parseImageMirrors(['k8s.gcr.io=mirror.example.com/gcr', 'registry.k8s.io=mirror.example.com/k8s', 'docker.io=mirror.example.com/hub']);
  assert.ok(!('problem' in parsed));
  const mirrors: ImageMirrors = parsed;
  const v1 = set(shipper('k8s.gcr.io/shipper:1'), mesh());
  const v2 = set(shipper('registry.k8s.io/shipper:2'), mesh());
  /** The pod as a policy after the injector left it: every image moved to the mirror. */
  const mirrored = (pod: any): any => {
    for (const c of [...(pod.spec.initContainers ?? []), ...pod.spec.containers]) {
      c.image = c.image
        .replace(/^k8s\.gcr\.io\//, 'mirror.example.com/gcr/')
        .replace(/^registry\.k8s\.io\//, 'mirror.example.com/k8s/')
        .replace(/^envoyproxy\//, 'mirror.example.com/hub/envoyproxy/');
    }
    return pod;
  };
  const verdict = (pod: any, s: TemplateSet, m?: ImageMirrors): { kind: string; reason: string } => {
    const v = verifyPod(pod, s, 'default', {}, undefined, m);
    return { kind: v.kind, reason: v.reason };
  };

  it('admits by the current set and says a mirror was used; refuses without the mirrors', () => {
    const pod = mirrored(inject(v2));
    assert.equal(pod.spec.containers[1].image, 'mirror.example.com/k8s/shipper:2');
    assert.deepEqual(verdict(pod, v2, mirrors), { kind: 'allowed', reason: Reason.SidecarsMirrored });
    assert.deepEqual(verdict(pod, v2), { kind: 'denied', reason: Reason.SidecarsMissing });
  });

  it('admits a mirrored pod of a set served within the window (step 2), and by its record (step 3)', () => {
    assert.deepEqual(verdict(mirrored(inject(v1)), replica([v1, v2]), mirrors), { kind: 'allowed', reason: Reason.EarlierTemplates });
    assert.deepEqual(verdict(mirrored(inject(v2)), replica([v1]), mirrors), { kind: 'allowed', reason: Reason.RecordedTemplates });
    assert.deepEqual(verdict(mirrored(inject(v2)), replica([v1])), { kind: 'denied', reason: Reason.SidecarsMissing });
  });
});
