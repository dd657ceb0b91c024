import { readFileSync } from 'node:fs';
import { injectSidecars } from '../../src/inject/mutate.js';
import { OptInScope, selectTemplates } from '../../src/inject/policy.js';
import type { Pod } from '../../src/kube/types.js';
import { kubeApiAccessVolume } from './service-account.js';
import { compileTemplateSet, type TemplateSet } from '../../src/templates/load.js';

const DIR = 'test/fixtures/cli/templates';

/** The CLI fixture templates (log-agent, the default, with `{{ pod.name }}`; mesh), with `edit` applied to their text. */
export function templates(edit: (text: string) => string = (t) => t, extra: readonly { file: string; text: string }[] = []): TemplateSet {
  const files = ['log-agent.yaml', 'mesh.yaml'].map((f) => ({ file: `${DIR}/${f}`, text: edit(readFileSync(`${DIR}/${f}`, 'utf8')) }));
  return compileTemplateSet([...files, ...extra], DIR);
}

/** The same templates a release ago: an older log agent image. */
export const oldTemplates = (): TemplateSet => templates((t) => t.replace('log-agent:1.4.0', 'log-agent:1.3.0'));

/** A template the platform team has since retired. */
export const RETIRED = {
  file: 'retired.yaml',
  text: 'apiVersion: sidecar-injector.io/v1alpha1\nkind: SidecarTemplate\nmetadata:\n  name: retired\nspec:\n  containers:\n    - name: retired-agent\n      image: registry.example.com/retired:1.0.0\n',
};

export interface RunningPod {
  readonly namespace: string;
  /** The controller's generateName, e.g. `web-7c9f8b6d4-`; the apiserver appends `suffix`. */
  readonly generateName?: string;
  readonly name?: string;
  readonly suffix?: string;
  readonly owner?: { readonly apiVersion: string; readonly kind: string; readonly name: string };
  readonly labels?: Record<string, string>;
  readonly annotations?: Record<string, string>;
  readonly phase?: string;
  /** Injected by the install of this revision (--revision). */
  readonly revision?: string;
}

/**
 * A pod as it runs in the cluster after admission injected it with `set`: admitted the way the server
 * admits (selectTemplates, injectSidecars), then named by the apiserver and scheduled.
 */
export function runningPod(set: TemplateSet, p: RunningPod): Pod & { status: { phase: string } } {
  const metadata = {
    ...(p.name !== undefined ? { name: p.name } : { generateName: p.generateName ?? '' }),
    namespace: p.namespace,
    labels: { 'sidecar-injector.io/inject': 'true', ...p.labels },
    ...(p.annotations !== undefined && { annotations: p.annotations }),
    ...(p.owner !== undefined && { ownerReferences: [{ ...p.owner, uid: `uid-${p.owner.name}`, controller: true, blockOwnerDeletion: true }] }),
  };
  const pod: Pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata,
    spec: { restartPolicy: p.owner?.kind === 'Job' ? 'Never' : 'Always', containers: [{ name: 'app', image: 'registry.example.com/app:1' }] },
  };
  const selection = selectTemplates(pod, set, OptInScope.Namespace);
  if (!selection.inject) throw new Error(`test pod not injected: ${selection.detail}`);
  const injected = injectSidecars(pod, selection.templates, p.namespace, p.revision === undefined ? {} : { revision: p.revision }).pod;
  const name = p.name ?? `${p.generateName ?? ''}${p.suffix ?? 'x7k2p'}`;
  return { ...injected, metadata: { ...injected.metadata, name, uid: `uid-${name}` }, status: { phase: p.phase ?? 'Running' } };
}

/**
 * A pod admission never injected (created before the injector was installed, or while it was down
 * and its webhook failed open), as the apiserver stores it: defaulted (pkg/apis/core/v1/defaults.go:
 * pull policy, termination message, DNS and scheduler, the not-ready/unreachable tolerations the
 * DefaultTolerationSeconds plugin adds), with the ServiceAccount admission plugin's projected
 * `kube-api-access-*` volume and mount, then named and scheduled. A mutating webhook sees the same
 * pod but for the name, uid, node and status.
 */
export function storedPod(p: RunningPod): Pod & { status: { phase: string } } {
  const name = p.name ?? `${p.generateName ?? ''}${p.suffix ?? 'x7k2p'}`;
  const token = `kube-api-access-${p.suffix ?? 'x7k2p'}`;
  const toleration = (key: string) => ({ key, operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 });
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      ...(p.generateName !== undefined && { generateName: p.generateName }),
      namespace: p.namespace,
      uid: `uid-${name}`,
      ...(p.labels !== undefined && { labels: p.labels }),
      ...(p.annotations !== undefined && { annotations: p.annotations }),
      ...(p.owner !== undefined && { ownerReferences: [{ ...p.owner, uid: `uid-${p.owner.name}`, controller: true, blockOwnerDeletion: true }] }),
    },
    spec: {
      containers: [
        {
          name: 'app',
          image: 'registry.example.com/app:1',
          imagePullPolicy: 'IfNotPresent',
          resources: {},
          terminationMessagePath: '/dev/termination-log',
          terminationMessagePolicy: 'File',
          volumeMounts: [{ name: token, mountPath: '/var/run/secrets/kubernetes.io/serviceaccount', readOnly: true }],
        },
      ],
      dnsPolicy: 'ClusterFirst',
      enableServiceLinks: true,
      nodeName: 'node-1',
      preemptionPolicy: 'PreemptLowerPriority',
      priority: 0,
      restartPolicy: p.owner?.kind === 'Job' ? 'Never' : 'Always',
      schedulerName: 'default-scheduler',
      securityContext: {},
      serviceAccount: 'default',
      serviceAccountName: 'default',
      terminationGracePeriodSeconds: 30,
      tolerations: [toleration('node.kubernetes.io/not-ready'), toleration('node.kubernetes.io/unreachable')],
      volumes: [kubeApiAccessVolume(token)],
    },
    status: { phase: p.phase ?? 'Running' },
  };
}
