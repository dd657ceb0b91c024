import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { selectTemplates } from '../../src/inject/policy.js';
import { applyInjection, planInjection } from '../../src/inject/mutate.js';
import { diff } from '../../src/patch/diff.js';
import { compileTemplateSet, readTemplateDir } from '../../src/templates/load.js';
import { applyPatchV4 } from '../helpers/jsonpatch-v4.js';
import { podProblems } from '../helpers/pod.js';

/**
 * Golden files: each folder of test/fixtures/inject holds pod.yaml; the patch the mutating handler
 * answers (diff of the pod and the injected pod, src/patch/diff.ts) is compared with patch.json byte for byte, the
 * pod that patch makes under the strict json-patch v4 applier with injected.yaml, and the warnings
 * with warnings.json (when there are any). REFRESH_GOLDEN=true rewrites them after an intended
 * change (Istio's REFRESH_GOLDEN).
 */
const ROOT = 'test/fixtures/inject';
const refresh = process.env['REFRESH_GOLDEN'] === 'true';
const set = compileTemplateSet([...(await readTemplateDir('templates')), ...(await readTemplateDir('test/fixtures/templates'))], 'golden');

function golden(file: string, actual: string): void {
  if (refresh) {
    writeFileSync(file, actual);
    return;
  }
  assert.ok(existsSync(file), `${file} is missing; run with REFRESH_GOLDEN=true to create it`);
  assert.equal(actual, readFileSync(file, 'utf8'), `${file} differs; run with REFRESH_GOLDEN=true if the change is intended`);
}

describe('inject (golden files)', () => {
  for (const name of readdirSync(ROOT).sort()) {
    it(name, () => {
      const dir = join(ROOT, name);
      const pod = parse(readFileSync(join(dir, 'pod.yaml'), 'utf8'));
      const namespace = pod.metadata?.namespace ?? 'team-a';
      const selection = selectTemplates(pod, set);
      assert.ok(selection.inject, `${name}: the pod must opt in`);
      const injection = planInjection(pod, selection.templates, namespace);
      const patch = JSON.stringify(diff(pod, applyInjection(pod, injection)));
      const patched = applyPatchV4(pod, JSON.parse(patch));

      golden(join(dir, 'patch.json'), `${JSON.stringify(JSON.parse(patch), null, 2)}\n`);
      golden(join(dir, 'injected.yaml'), stringify(patched));
      const warningsFile = join(dir, 'warnings.json');
      if (injection.warnings.length > 0) golden(warningsFile, `${JSON.stringify(injection.warnings, null, 2)}\n`);
      else if (refresh) rmSync(warningsFile, { force: true });
      else assert.ok(!existsSync(warningsFile), `${warningsFile} expects warnings, none were given`);

      assert.deepEqual(podProblems(patched), []);
      assert.deepEqual(
        diff(patched, applyInjection(patched, planInjection(patched, selection.templates, namespace))),
        [],
        'injecting again must change nothing',
      );
      assert.deepEqual(parse(readFileSync(join(dir, 'pod.yaml'), 'utf8')), pod, 'the input pod must not be modified');
    });
  }
});
