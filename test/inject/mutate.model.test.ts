import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { ReviewRequest } from '../../src/admission/codec.js';
import { compileTemplateSet, type TemplateSet } from '../../src/templates/load.js';
import { admissionView } from '../corpus/admission-view.js';
import { corpusManifests, corpusTemplates, DefaultNamespace, readYaml11, SidecarsDir } from '../corpus/corpus.js';
import { caseArb, loadSet, TemplateNames, wire } from '../helpers/injection-cases.js';
import { expectedInjection, type Expected, type TemplateDoc } from '../helpers/injection-model.js';
import { applyPatchV4 } from '../helpers/jsonpatch-v4.js';
import { decodePatch, mutate, podReview } from '../helpers/review.js';

/**
 * The mutating handler against a second, independent account of what an injection must make.
 *
 * The handler plans the injection (planInjection), applies it (applyInjection) and answers with
 * the difference (src/patch/diff.ts); test/inject/patch.test.ts holds the patch to the pod the
 * same plan makes, so a wrong decision in the plan passes there. Here the pod the handler's patch yields (applied with
 * evanphx/json-patch v4 semantics, as the apiserver does) must equal the pod of
 * test/helpers/injection-model.ts, an executable model of the injection rules in docs/templates.md, written from the
 * documentation rather than from src/inject; and a denial must be the model's, for the model's reason.
 *
 * Why a model from the documentation, not the pre-redesign injector from git history (injectSidecars at
 * b5ebad4^): that injector already went through renderForPod and the injection plan (planFor,
 * sidecarsOf: which list a sidecar goes into and where, the names looked up), so a wrong decision in
 * those, and any bug of that time, would be shared by both sides. The model shares no code that
 * decides anything (only the image grammar and the templates' version digests), is short enough to
 * read against the documentation, and settles its silences in the open (its doc comment).
 *
 * Over generated pods and templates (the generator of test/inject/property.test.ts, which also
 * reaches opt-out, unknown and default selections here) and over the real-world corpus: every pod
 * with each sidecar, and with each pair of them.
 */

const RUNS = Number(process.env['PROPERTY_RUNS'] ?? 400);

interface Tally {
  injected: number;
  denied: Record<string, number>;
  skipped: number;
}

/** What the handler answers for `pod`, as the pod the apiserver then stores, or the denial, next to the model's. */
function compare(pod: object, set: TemplateSet, docs: readonly TemplateDoc[], namespace: string, tally: Tally): void {
  const { request } = podReview(pod, { namespace });
  const verdict = mutate(request as ReviewRequest, set);
  const expected: Expected = expectedInjection(wire(pod), docs, namespace);
  const response = verdict.response;
  if (expected.outcome === 'denied') {
    assert.equal(response.allowed, false, `the model denies (${expected.reason}); the handler allowed`);
    assert.equal(verdict.reason, expected.reason, `denied for another reason: ${response.status?.message}`);
    tally.denied[expected.reason] = (tally.denied[expected.reason] ?? 0) + 1;
    return;
  }
  assert.equal(
    response.allowed,
    true,
    `the model ${expected.outcome === 'skipped' ? 'skips the pod' : 'injects'}; the handler denied: ${response.status?.message}`,
  );
  if (expected.outcome === 'skipped') {
    assert.equal(response.patch, undefined, 'the model leaves the pod alone; the handler patched it');
    assert.equal(verdict.decision, 'skipped');
    tally.skipped++;
    return;
  }
  const patched = applyPatchV4(pod, decodePatch(response));
  assert.deepStrictEqual(readable(patched), readable(expected.pod));
  tally.injected++;
}

/** A pod with its status annotation parsed, so that a difference in it reads as one. */
function readable(pod: any): any {
  const out = wire(pod);
  const status = out.metadata?.annotations?.['sidecar-injector.io/status'];
  if (typeof status === 'string') out.metadata.annotations['sidecar-injector.io/status'] = JSON.parse(status);
  return out;
}

function docsOf(set: TemplateSet, specs: ReadonlyMap<string, object>): TemplateDoc[] {
  return [...set.templates.values()].map((t) => ({ name: t.name, version: t.version, spec: specs.get(t.name)! }));
}

/** How the generated pod opts in and names its templates: mostly as users do, sometimes not at all or wrongly. */
const optInArb = fc.record({
  label: fc.constantFrom('true', 'true', 'true', 'true', 'true', 'true', 'true', 'true', 'false', undefined),
  // undefined: no annotation (the defaults); 'blank' an empty one; else the selection written with spaces, a repeat, a blank, or an unknown name.
  names: fc.constantFrom('plain', 'plain', 'plain', 'plain', 'plain', 'plain', 'spaced', 'absent', 'blank', 'unknown'),
});

function optedIn(pod: any, selected: readonly string[], optIn: { label: string | undefined; names: string }): object {
  const out = wire(pod);
  out.metadata ??= {};
  if (optIn.label !== undefined) out.metadata.labels = { ...out.metadata.labels, 'sidecar-injector.io/inject': optIn.label };
  const value = {
    plain: selected.join(','),
    spaced: ` ${selected.join(' , ')}, ,${selected[0]}`,
    absent: undefined,
    blank: '',
    unknown: `${selected.join(',')},t9`,
  }[optIn.names];
  if (value !== undefined) out.metadata.annotations = { ...out.metadata.annotations, 'sidecar-injector.io/templates': value };
  return out;
}

describe('the mutating handler against the model of README injection rules', () => {
  it('yields the model pod, or its refusal, for generated pods and templates', (t) => {
    const tally: Tally = { injected: 0, denied: {}, skipped: 0 };
    let sets = 0;
    fc.assert(
      fc.property(caseArb, optInArb, ({ pod, templates, selected, namespace }, optIn) => {
        const set = loadSet(templates);
        if (set === undefined) return;
        sets++;
        const specs = new Map(templates.map((d: any, i) => [TemplateNames[i]!, d.spec]));
        compare(optedIn(pod, selected, optIn), set, docsOf(set, specs), namespace, tally);
      }),
      { numRuns: RUNS },
    );
    t.diagnostic(`${RUNS} cases, ${sets} template sets loaded: ${tally.injected} injected, ${tally.skipped} skipped, denied ${JSON.stringify(tally.denied)}`);
    // Guards against a generator that stops reaching injections or any of the refusals.
    assert.ok(tally.injected > sets / 3, `injected ${tally.injected} of ${sets}`);
    for (const reason of ['unknown-template', 'template-conflict', 'override-refused', 'volume-missing', 'template-value-invalid'])
      assert.ok((tally.denied[reason] ?? 0) > 0, `no case denied for ${reason}`);
  });

  it('yields the model pod for every corpus pod with each sidecar and each pair of sidecars', (t) => {
    const templates = corpusTemplates();
    const set = compileTemplateSet(
      templates.map((c) => ({ file: c.file, text: c.text })),
      SidecarsDir,
    );
    const specs = new Map(templates.map((c) => [c.name, readYaml11(join(SidecarsDir, c.file))[0]!['spec']]));
    const docs = docsOf(set, specs);
    const names = templates.map((c) => c.name);
    const selections = [...names.map((n) => [n]), ...names.flatMap((a, i) => names.slice(i + 1).map((b) => [a, b]))];
    const tally: Tally = { injected: 0, denied: {}, skipped: 0 };
    for (const manifest of corpusManifests()) {
      for (const selection of selections) {
        const { pod, namespace } = admissionView(manifest.object, selection, DefaultNamespace);
        // The model leaves pod-level spec.resources out (the sidecars' requests against the pod's
        // own): test/inject/resources.test.ts and the corpus test's expected refusals cover it.
        if (pod.spec?.resources !== undefined) continue;
        try {
          compare(pod, set, docs, namespace, tally);
        } catch (err) {
          throw new Error(`${manifest.file} with ${selection.join(',')}: ${(err as Error).message}`, { cause: err });
        }
      }
    }
    t.diagnostic(`${tally.injected} injected, denied ${JSON.stringify(tally.denied)}`);
    assert.ok(tally.injected > 1000, `injected ${tally.injected}`);
  });
});
