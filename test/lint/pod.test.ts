import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Container, Pod } from '../../src/kube/types.js';
import { podFaults, PodSecurityLevel } from '../../src/lint/pod.js';

/** A container that satisfies Pod Security restricted on its own. */
const hardened = (name: string, extra: Record<string, unknown> = {}): Container => ({
  name,
  image: 'registry.example.com/app:1',
  securityContext: { allowPrivilegeEscalation: false, runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' }, capabilities: { drop: ['ALL'] } },
  ...extra,
});

const podOf = (spec: Record<string, unknown>): Pod => ({ metadata: { name: 'p' }, spec: { containers: [hardened('app')], ...spec } });

/** `container|volume path` of each fault, which is what lint points a person at. */
const where = (pod: Pod, level: PodSecurityLevel): string[] => podFaults(pod, level).map((f) => `${f.container ?? f.volume ?? 'pod'} ${f.path}`);

describe('podFaults', () => {
  it('finds nothing in a pod that is valid and restricted', () => {
    assert.deepEqual(podFaults(podOf({ volumes: [{ name: 'cache', emptyDir: {} }] }), PodSecurityLevel.Restricted), []);
  });

  // [what, spec, the faults at level none]: what the apiserver would refuse (or warn of) after the patch.
  const invalid: [string, Record<string, unknown>, string[]][] = [
    [
      'two volumes of one name',
      {
        volumes: [
          { name: 'v', emptyDir: {} },
          { name: 'v', emptyDir: {} },
        ],
      },
      ['v /name'],
    ],
    ['two containers of one name', { containers: [hardened('app'), hardened('app')] }, ['app /name']],
    ['restartPolicy on a regular container', { containers: [hardened('app', { restartPolicy: 'Always' })] }, ['app /restartPolicy']],
    [
      'a mount of a volume the pod lacks',
      { containers: [hardened('app', { volumeMounts: [{ name: 'logs', mountPath: '/logs' }] })] },
      ['app /volumeMounts/0/name'],
    ],
    [
      'one path mounted twice',
      {
        volumes: [
          { name: 'a', emptyDir: {} },
          { name: 'b', emptyDir: {} },
        ],
        containers: [
          hardened('app', {
            volumeMounts: [
              { name: 'a', mountPath: '/x' },
              { name: 'b', mountPath: '/x' },
            ],
          }),
        ],
      },
      ['app /volumeMounts/1/mountPath'],
    ],
    [
      'one port name in two containers',
      {
        containers: [hardened('app', { ports: [{ name: 'http', containerPort: 80 }] }), hardened('proxy', { ports: [{ name: 'http', containerPort: 15001 }] })],
      },
      ['proxy /ports/0/name'],
    ],
    [
      'one port and protocol in two containers',
      { containers: [hardened('app', { ports: [{ containerPort: 80 }] }), hardened('proxy', { ports: [{ containerPort: 80, protocol: 'TCP' }] })] },
      ['proxy /ports/0/containerPort'],
    ],
  ];
  for (const [what, spec, want] of invalid) {
    it(`reports ${what}, at every level`, () => {
      assert.deepEqual(where(podOf(spec), PodSecurityLevel.None), want);
      assert.deepEqual(where(podOf(spec), PodSecurityLevel.Restricted).slice(0, want.length), want, 'validity comes first');
    });
  }

  it('lets one port number serve two protocols', () => {
    assert.deepEqual(
      where(
        podOf({
          containers: [
            hardened('dns', {
              ports: [
                { containerPort: 53, protocol: 'UDP' },
                { containerPort: 53, protocol: 'TCP' },
              ],
            }),
          ],
        }),
        PodSecurityLevel.None,
      ),
      [],
    );
  });

  // [what, spec, the faults at baseline]: k8s.io/pod-security-admission policy/check_*.go.
  const notBaseline: [string, Record<string, unknown>, string[]][] = [
    ['host namespaces', { hostNetwork: true, hostPID: true }, ['pod /spec/hostNetwork', 'pod /spec/hostPID']],
    ['a hostPath volume', { volumes: [{ name: 'root', hostPath: { path: '/' } }] }, ['root /hostPath']],
    ['a privileged container', { containers: [hardened('app', { securityContext: { privileged: true } })] }, ['app /securityContext/privileged']],
    [
      'an added capability beyond the default set',
      { containers: [hardened('app', { securityContext: { capabilities: { add: ['NET_BIND_SERVICE', 'SYS_ADMIN'] } } })] },
      ['app /securityContext/capabilities/add'],
    ],
    ['a host port', { containers: [hardened('app', { ports: [{ containerPort: 80, hostPort: 8080 }] })] }, ['app /ports/0/hostPort']],
    [
      'an Unconfined seccomp profile',
      { containers: [hardened('app', { securityContext: { seccompProfile: { type: 'Unconfined' } } })] },
      ['app /securityContext/seccompProfile/type'],
    ],
    [
      'an SELinux user',
      { containers: [hardened('app', { securityContext: { seLinuxOptions: { user: 'system_u' } } })] },
      ['app /securityContext/seLinuxOptions'],
    ],
  ];
  for (const [what, spec, want] of notBaseline) {
    it(`refuses ${what} from baseline on, and not at none`, () => {
      assert.deepEqual(where(podOf(spec), PodSecurityLevel.Baseline), want);
      assert.deepEqual(where(podOf(spec), PodSecurityLevel.None), []);
    });
  }

  it('asks restricted of every container, taking runAsNonRoot and seccomp from the pod when the container does not say', () => {
    const plain: Container = { name: 'sidecar', image: 'registry.example.com/s:1' };
    assert.deepEqual(where(podOf({ containers: [plain] }), PodSecurityLevel.Restricted), [
      'sidecar /securityContext/allowPrivilegeEscalation',
      'sidecar /securityContext/runAsNonRoot',
      'sidecar /securityContext/seccompProfile/type',
      'sidecar /securityContext/capabilities/drop',
    ]);
    const fromPod = podOf({
      securityContext: { runAsNonRoot: true, seccompProfile: { type: 'Localhost' } },
      containers: [{ ...plain, securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } } }],
    });
    assert.deepEqual(where(fromPod, PodSecurityLevel.Restricted), []);
    assert.deepEqual(where(fromPod, PodSecurityLevel.Baseline), []);
  });

  it('refuses from restricted a root user, a capability other than NET_BIND_SERVICE, and volume types beyond its list', () => {
    const pod = podOf({
      volumes: [{ name: 'nfs', nfs: { server: 'n', path: '/' } }, { name: 'plain' }],
      containers: [
        hardened('app', {
          securityContext: {
            ...(hardened('app').securityContext as object),
            runAsUser: 0,
            capabilities: { drop: ['ALL'], add: ['NET_BIND_SERVICE', 'CHOWN'] },
          },
        }),
      ],
    });
    assert.deepEqual(where(pod, PodSecurityLevel.Restricted), ['nfs /nfs', 'app /securityContext/runAsUser', 'app /securityContext/capabilities/add']);
  });
});
