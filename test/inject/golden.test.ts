import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { selectTemplates } from '../../src/inject/policy.js';
import { injectSidecars } from '../../src/inject/mutate.js';
import { diff } from '../../src/patch/diff.js';
import { compileTemplateSet, readTemplateDir } from '../../src/templates/load.js';
import { applyPatchV4 } from '../helpers/jsonpatch-v4.js';
import { podProblems } from '../helpers/pod.js';

/**
 * Golden files: each folder of test/fixtures/inject holds pod.yaml; the engine's output is compared
 * with injected.yaml, patch.json and (when there are any) warnings.json. REFRESH_GOLDEN=true
 * rewrites them after an intended change (Istio's REFRESH_GOLDEN).
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
      const result = injectSidecars(pod, selection.templates, namespace);
      const ops = diff(pod, result.pod);

      golden(join(dir, 'injected.yaml'), stringify(result.pod));
      golden(join(dir, 'patch.json'), `${JSON.stringify(ops, null, 2)}\n`);
      const warningsFile = join(dir, 'warnings.json');
      if (result.warnings.length > 0) golden(warningsFile, `${JSON.stringify(result.warnings, null, 2)}\n`);
      else if (refresh) rmSync(warningsFile, { force: true });
      else assert.ok(!existsSync(warningsFile), `${warningsFile} expects warnings, none were given`);

      const patched = applyPatchV4(pod, ops);
      assert.deepEqual(patched, result.pod, 'the patch must turn the pod into the injected pod');
      assert.deepEqual(podProblems(patched), []);
      assert.deepEqual(diff(patched, injectSidecars(patched, selection.templates, namespace).pod), [], 'injecting again must change nothing');
      assert.deepEqual(parse(readFileSync(join(dir, 'pod.yaml'), 'utf8')), pod, 'the input pod must not be modified');
    });
  }
});
