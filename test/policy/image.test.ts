import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parseImage, sameRepository } from '../../src/kube-values/image.js';
import { imagePattern, repositoryPattern, sameRepositoryCel } from '../../src/policy/image.js';

// The same image as src/inject/verify.ts's sameImage decides it: one repository, tag and digest.
function sameImage(a: string, b: string): boolean {
  if (a === b) return true;
  const x = parseImage(a);
  const y = parseImage(b);
  return !('problem' in x) && !('problem' in y) && x.repository === y.repository && x.tag === y.tag && x.digest === y.digest;
}

const DIGEST = `sha256:${'0123456789abcdef'.repeat(4)}`;
const TEMPLATES = [
  'busybox',
  'busybox:1.36',
  'library/busybox:latest',
  'fluent/fluent-bit:3.1',
  'registry.example.com/agent:1',
  `localhost:5000/agent@${DIGEST}`,
  `registry.example.com/agent:1@${DIGEST}`,
];
const FOUND = [
  'busybox',
  'busybox:latest',
  'busybox:1.36',
  'library/busybox',
  'docker.io/busybox:1.36',
  'docker.io/library/busybox:1.36',
  'index.docker.io/library/busybox',
  'index.docker.io/busybox:1.36',
  `busybox@${DIGEST}`,
  `busybox:1.36@${DIGEST}`,
  'busybox:1.36@sha256:nothex',
  'busybox:-bad',
  'mirror.example.com/library/busybox',
  'busyboxx',
  'fluent/fluent-bit:3.1',
  'docker.io/fluent/fluent-bit:3.1',
  'index.docker.io/fluent/fluent-bit',
  'fluent-bit:3.1',
  'library/fluent/fluent-bit:3.1',
  'registry.example.com/agent:1',
  'registry.example.com/agent',
  'registry.example.com/agent:2',
  `registry.example.com/agent@${DIGEST}`,
  `registry.example.com/agent:1@${DIGEST}`,
  'registry.example.com/agent/x:1',
  'registry.example.com/agentx:1',
  'registryXexample.com/agent:1',
  'docker.io/registry.example.com/agent:1',
  'localhost:5000/agent',
  `localhost:5000/agent@${DIGEST}`,
  'localhost/agent',
  '',
];

/**
 * The RE2 patterns the validating policies match a pod's image with (JavaScript's RegExp reads these
 * patterns as RE2 does: classes, groups, bounded repetition, anchors) decide as the webhook does:
 * at CREATE the same repository (sameRepository), at UPDATE the same image (sameImage).
 */
describe('policy image patterns', () => {
  it("take exactly the references the webhook's sameRepository takes", () => {
    for (const template of TEMPLATES) {
      const pattern = new RegExp(repositoryPattern(template)!);
      for (const found of FOUND) assert.equal(pattern.test(found), sameRepository(template, found), `${template} vs ${found}`);
    }
  });

  it("take exactly the references the webhook's sameImage takes", () => {
    for (const template of TEMPLATES) {
      const pattern = new RegExp(imagePattern(template)!);
      for (const found of FOUND) assert.equal(pattern.test(found), sameImage(template, found), `${template} vs ${found}`);
    }
  });

  it('compare an image with a placeholder as the rendered text', () => {
    assert.equal(repositoryPattern('registry.example.com/{{ namespace }}/agent:1'), undefined);
    assert.equal(
      sameRepositoryCel('x.image', 'registry.example.com/{{ namespace }}/agent:1'),
      'x.image == ("registry.example.com/" + (request.namespace != "" ? request.namespace : "") + "/agent:1")',
    );
  });
});
