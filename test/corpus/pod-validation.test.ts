import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { podValidationErrors } from './pod-validation.js';

const pod = (spec: object) => ({ metadata: { name: 'p' }, spec: { containers: [{ name: 'app', image: 'nginx' }], ...spec } });

describe('core/v1 pod validation of the corpus test', () => {
  it('accepts a plain pod', () => {
    assert.deepEqual(podValidationErrors(pod({})), []);
  });

  it('refuses a file mode written as decimal 775 (0o1407), as the apiserver does', () => {
    const errs = podValidationErrors(pod({ volumes: [{ name: 's', configMap: { name: 'c', defaultMode: 775 } }] }));
    assert.match(errs.join('\n'), /defaultMode: Invalid value: 775: must be a number between 0 and 0777/);
    assert.deepEqual(podValidationErrors(pod({ volumes: [{ name: 's', configMap: { name: 'c', defaultMode: 0o775 } }] })), []);
  });

  it('refuses a probe whose port was lost (an unknown field such as `prot` is dropped by the apiserver)', () => {
    const errs = podValidationErrors(pod({ containers: [{ name: 'app', image: 'nginx', readinessProbe: { httpGet: { path: '/ready' } } }] }));
    assert.match(errs.join('\n'), /readinessProbe\.httpGet\.port: Required value/);
  });

  it('allows probes on a native sidecar and refuses them on a plain init container', () => {
    const probe = { httpGet: { path: '/', port: 80 } };
    assert.deepEqual(podValidationErrors(pod({ initContainers: [{ name: 's', image: 'x', restartPolicy: 'Always', readinessProbe: probe }] })), []);
    assert.match(podValidationErrors(pod({ initContainers: [{ name: 's', image: 'x', readinessProbe: probe }] })).join('\n'), /Forbidden/);
  });

  it('refuses a volume with two sources and a host port used twice', () => {
    const errs = podValidationErrors(
      pod({
        containers: [
          { name: 'a', image: 'x', ports: [{ containerPort: 80, hostPort: 8080 }] },
          { name: 'b', image: 'x', ports: [{ containerPort: 81, hostPort: 8080 }] },
        ],
        volumes: [{ name: 'v', emptyDir: {}, hostPath: { path: '/' } }],
      }),
    ).join('\n');
    assert.match(errs, /exactly one volume source/);
    assert.match(errs, /hostPort 8080\/TCP\/: Duplicate value/);
  });

  it('compares pod-level resources exactly, as resource.Quantity does (a double reads 0.1 + 0.2 above 0.3)', () => {
    const withResources = (resources: object, requests: string[], limit?: string) =>
      pod({
        resources,
        containers: requests.map((cpu, i) => ({ name: `c${i}`, image: 'x', resources: { requests: { cpu }, ...(limit && { limits: { cpu: limit } }) } })),
      });
    assert.deepEqual(podValidationErrors(withResources({ requests: { cpu: '300m' } }, ['100m', '200m'])), []);
    assert.deepEqual(podValidationErrors(withResources({ requests: { cpu: '0.3' } }, ['0.1', '0.2'])), []);
    assert.deepEqual(podValidationErrors(withResources({ requests: { cpu: '1e3' } }, ['1k'])), []);
    assert.deepEqual(podValidationErrors(withResources({ limits: { cpu: '0.009' } }, ['9m'], '9m')), []);
    assert.match(
      podValidationErrors(withResources({ requests: { cpu: '0.3' } }, ['0.1', '200000001n'])).join('\n'),
      /aggregate container requests of 300000001n/,
    );
    assert.match(
      podValidationErrors(withResources({ requests: { cpu: '300m' } }, ['300m', '0.0000000001'])).join('\n'),
      /aggregate container requests of 300000001n/,
    );
    assert.match(
      podValidationErrors(withResources({ limits: { cpu: '0.009' } }, ['1m'], '9000001n')).join('\n'),
      /must be less than or equal to pod limits of "0.009"/,
    );
  });
});
