import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseObjects } from '../../scripts/render-install.js';
import { injector, one, tools } from './render.js';

/**
 * `make` with kubectl, helm and docker replaced by recorders: kubectl `apply -k DIR` renders DIR with
 * the real kubectl kustomize, helm `upgrade --install` becomes the real `helm template` with the same
 * flags, and each records its arguments. So the test sees what would reach the cluster or registry.
 */
function makeWith(target: string, vars: Record<string, string>): { log: string[]; applied: ReturnType<typeof parseObjects> } {
  const dir = mkdtempSync(join(tmpdir(), 'make-'));
  const fake = (name: string, body: string): string => {
    const path = join(dir, name);
    writeFileSync(path, `#!/bin/sh\necho "${name} $*" >> ${dir}/log\n${body}\n`);
    chmodSync(path, 0o755);
    return path;
  };
  const kubectl = fake('kubectl', `if [ "$1" = apply ] && [ "$2" = -k ]; then exec ${tools.kubectl} kustomize "$3" > ${dir}/applied.yaml; fi`);
  const helm = fake(
    'helm',
    `[ "$1 $2" = "upgrade --install" ] || exit 0; shift 2; args=""; while [ $# -gt 0 ]; do case $1 in --create-namespace|--wait) ;; --timeout) shift ;; *) args="$args $1" ;; esac; shift; done; exec ${tools.helm} template $args > ${dir}/applied.yaml`,
  );
  const docker = fake('docker', '');
  execFileSync('make', ['-s', target, `KUBECTL=${kubectl}`, `HELM=${helm}`, `DOCKER=${docker}`, ...Object.entries(vars).map(([k, v]) => `${k}=${v}`)], { env: tools.env, stdio: ['ignore', 'pipe', 'pipe'] });
  const read = (f: string): string => {
    try {
      return readFileSync(join(dir, f), 'utf8');
    } catch {
      return '';
    }
  };
  return { log: read('log').trim().split('\n'), applied: parseObjects(read('applied.yaml')) };
}

describe('Makefile', () => {
  it('make deploy installs the image named by IMAGE, with a tag or a digest, from the base or an overlay', () => {
    const tagged = makeWith('deploy', { IMAGE: 'registry.example:5000/team/injector:v2' });
    assert.equal(injector(tagged.applied).image, 'registry.example:5000/team/injector:v2');
    assert.equal(one(tagged.applied, 'Namespace').metadata.name, 'sidecar-injector');
    assert.match(tagged.log.at(-1)!, /^kubectl -n sidecar-injector rollout status deployment\/sidecar-injector/);
    const digest = `sha256:${'b'.repeat(64)}`;
    const pinned = makeWith('deploy', { IMAGE: `registry.example/injector@${digest}`, OVERLAY: 'overlays/cert-manager' });
    assert.equal(injector(pinned.applied).image, `registry.example/injector@${digest}`);
    assert.ok(pinned.applied.some((o) => o.kind === 'Certificate'), 'the cert-manager overlay');
  });

  it('make helm-deploy installs the chart with the image named by IMAGE', () => {
    const { applied, log } = makeWith('helm-deploy', { IMAGE: 'registry.example/injector:v3', NAMESPACE: 'platform' });
    assert.equal(injector(applied).image, 'registry.example/injector:v3');
    assert.equal(one(applied, 'Deployment').metadata.namespace, 'platform');
    assert.match(log[0]!, /--create-namespace .*--wait/);
  });

  it('make docker-push builds and pushes IMAGE', () => {
    const { log } = makeWith('docker-push', { IMAGE: 'registry.example/injector:v4' });
    assert.deepEqual(log, ['docker build -t registry.example/injector:v4 .', 'docker push registry.example/injector:v4']);
  });
});
