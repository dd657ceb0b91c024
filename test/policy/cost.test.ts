import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { compilePolicies } from '../../src/policy/compile.js';
import { findCelcost, measureCost, problemLines, samplePod, worstExpression, type CostReport } from '../../src/policy/cost.js';
import { loadTemplateSet } from '../../src/templates/load.js';
import { verify } from '../../src/cli/policies.js';
import { captureIO, cli } from '../helpers/cli.js';

const found = findCelcost();
const skip = 'absent' in found ? found.absent : false;
const binary = 'binary' in found ? found.binary : '';

/** A ValidatingAdmissionPolicy on pods with the given validation expressions. */
function validating(name: string, ...expressions: string[]): object {
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicy',
    metadata: { name },
    spec: {
      failurePolicy: 'Fail',
      matchConstraints: { resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] }] },
      validations: expressions.map((expression) => ({ expression })),
    },
  };
}

/** A pod of `n` containers (about 40 bytes each: 1500 is 60 KB, far inside the apiserver's 3 MiB). */
function wide(n: number): object {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: `wide-${n}` },
    spec: { containers: Array.from({ length: n }, (_, i) => ({ name: `c${i}`, image: 'x' })) },
  };
}

const policy = (r: CostReport, name: string) => r.policies.find((p) => p.name === name)!;

describe("the apiserver's CEL cost of policies (celcost)", { skip }, () => {
  it("measures the bundled templates' policies on their sample pods within the apiserver's limits", async () => {
    const set = await loadTemplateSet('templates');
    const { objects } = compilePolicies(set, { namespace: 'sidecar-injector' });
    const r = await measureCost(binary, objects, [samplePod('log-shipper'), samplePod('proxy')], { namespace: 'shop' });
    assert.deepEqual(r.limits, { perCall: 1_000_000, perPolicy: 10_000_000, matchConditions: 2_500_000 }, 'k8s.io/apiserver/pkg/apis/cel/config.go');
    assert.deepEqual(problemLines(r), []);
    assert.deepEqual(
      r.policies.map((p) => `${p.kind}/${p.name}`),
      [
        'MutatingAdmissionPolicy/sidecar-injector-log-shipper',
        'MutatingAdmissionPolicy/sidecar-injector-proxy',
        'ValidatingAdmissionPolicy/sidecar-injector-validate',
        'ValidatingAdmissionPolicy/sidecar-injector-validate-bounds',
      ],
    );
    const shipper = policy(r, 'sidecar-injector-log-shipper');
    assert.deepEqual(
      shipper.pods.map((p) => p.matched),
      [true, false],
      'each policy runs its mutation on the pod that selects it only',
    );
    const worst = worstExpression(shipper)!;
    assert.equal(worst.field, 'spec.mutations[0].jsonPatch.expression');
    assert.ok(worst.cost > 100 && worst.cost < r.limits.perCall, `${worst.cost}`);
  });

  it('charges every policy the same few units for a pod over the bounds, however far over: the size checks of its matchConditions', async () => {
    const set = await loadTemplateSet('templates');
    const { objects } = compilePolicies(set, { namespace: 'sidecar-injector' });
    const named = (n: number): object => {
      const pod = samplePod('log-shipper') as { metadata: { annotations: Record<string, string> } };
      return { ...pod, metadata: { ...pod.metadata, annotations: { 'sidecar-injector.io/templates': `log-shipper${',x'.repeat(n)}` } } };
    };
    const opted = (p: object): object => ({ ...p, metadata: { ...(p as any).metadata, labels: { 'sidecar-injector.io/inject': 'true' } } });
    const pods = [samplePod('log-shipper'), named(5_000), named(20_000), named(40_000), opted(wide(251)), opted(wide(5_000))];
    const r = await measureCost(binary, objects, pods, { namespace: 'shop' });
    assert.deepEqual(problemLines(r), []);
    for (const p of r.policies) {
      const over = p.pods.slice(1);
      const bounds = p.name === 'sidecar-injector-validate-bounds';
      for (const x of over) {
        assert.equal(x.matched, bounds, `${p.name} on ${x.pod}: only the bounds policy goes past its matchConditions`);
        assert.equal(x.error, undefined, `${p.name} on ${x.pod}`);
        assert.ok(x.cost < 1_000, `${p.name} on ${x.pod}: ${x.cost} units`);
      }
      // The same charge at 5,000, 20,000 and 40,000 names, at 251 and 5,000 containers: O(1) in the pod's size.
      assert.equal(new Set([over[0]!.cost, over[1]!.cost, over[2]!.cost]).size, 1, `${p.name}: ${over.map((x) => x.cost).join(', ')}`);
      assert.equal(over[3]!.cost, over[4]!.cost, `${p.name}: ${over.map((x) => x.cost).join(', ')}`);
    }
    assert.equal(policy(r, 'sidecar-injector-log-shipper').pods[0]!.matched, true, 'the typical pod is injected');
  });

  it('reports a quadratic comprehension over the pod as over the per-expression limit on a pod with many containers', async () => {
    const quadratic = 'object.spec.containers.all(a, object.spec.containers.all(b, a.name != "" && b.name != ""))';
    const r = await measureCost(binary, [validating('quadratic', quadratic)], [samplePod('any'), wide(1500)], { namespace: 'shop' });
    const p = policy(r, 'quadratic');
    assert.equal(p.pods[0]!.error, undefined, 'a pod of one container costs little');
    assert.match(p.pods[1]!.error!, /spec\.validations\[0\]\.expression: .*actual cost limit exceeded/);
    assert.deepEqual(problemLines(r), [
      `ValidatingAdmissionPolicy quadratic: pod wide-1500: the apiserver fails its admission: ${p.pods[1]!.error!.split('\n')[0]!}`,
    ]);
    const estimated = p.expressions[0]!.estimated!;
    assert.ok(estimated.max !== null && estimated.max > r.limits.perCall, 'the estimate over the Pod schema is over the limit too');
    assert.match(p.warnings.join('\n'), /spec\.validations\[0\]\.expression: estimated cost up to \d+, over the per-expression limit 1000000/);
  });

  it('reports a quadratic comprehension with a large constant bound as over the limit on any pod, and estimates it so', async () => {
    const huge = 'lists.range(2000).all(i, lists.range(2000).all(j, i + j >= 0))';
    const r = await measureCost(binary, [validating('huge', huge)], [samplePod('any')], { namespace: 'shop' });
    const p = policy(r, 'huge');
    assert.equal(p.problems.length, 1);
    assert.match(p.problems[0]!, /actual cost limit exceeded/);
    assert.equal(p.expressions[0]!.estimated!.max, 32_032_012, "cel-go's estimate: 4 million iterations");
  });

  it('reports an expression the apiserver does not compile as a refusal of the policy itself', async () => {
    const r = await measureCost(binary, [validating('typo', 'object.spec.containers.size() > 0', 'objec.spec.containers.size() > 0')], [], {
      namespace: 'shop',
    });
    assert.deepEqual(problemLines(r), [
      "ValidatingAdmissionPolicy typo: spec.validations[1].expression: the apiserver refuses the policy: compilation failed: ERROR: <input>:1:1: undeclared reference to 'objec' (in container '')",
    ]);
  });

  it('policies refuses, naming policy, expression and error, a policy set the apiserver would refuse', async () => {
    const set = await loadTemplateSet('templates');
    const { objects, verdicts } = compilePolicies(set, { namespace: 'sidecar-injector' });
    const expensive = validating('expensive', 'lists.range(2000).all(i, lists.range(2000).all(j, i + j >= 0))');
    const io = captureIO();
    const refused = await verify([...objects, expensive], verdicts, 'always', io);
    assert.equal(refused.length, 2, 'once per sample pod (one per compiled template)');
    assert.match(
      refused[0]!,
      /^the apiserver would refuse ValidatingAdmissionPolicy expensive: pod sample-log-shipper-: the apiserver fails its admission: spec\.validations\[0\]\.expression: expression '[^']+' resulted in error: operation cancelled: actual cost limit exceeded; nothing written: fix the template, or leave it to the webhook$/,
    );
    assert.deepEqual(await verify(objects, verdicts, 'always', io), [], 'the bundled policies pass');
  });

  it('policies --verify always checks the bundled policies and writes them; lint --policies gives each cost', async () => {
    const r = await cli(['policies', 'templates', '--verify', 'always', '-o', 'json']);
    assert.equal(r.code, 0, r.err);
    assert.equal(r.err, '');
    const lint = await cli(['lint', 'templates', '--policies']);
    assert.match(
      lint.out,
      /\npolicy: template "log-shipper": MutatingAdmissionPolicy sidecar-injector-log-shipper \(apiserver CEL cost on a sample pod: \d+; limits 1000000 per expression, 10000000 per policy\)\n/,
    );
  });
});

describe('policies and lint --policies without celcost', () => {
  async function withoutCelcost<T>(run: () => Promise<T>): Promise<T> {
    const saved = process.env['CELCOST'];
    process.env['CELCOST'] = '/nonexistent/celcost';
    try {
      return await run();
    } finally {
      if (saved === undefined) delete process.env['CELCOST'];
      else process.env['CELCOST'] = saved;
    }
  }

  it('--verify auto (the default) writes the policies and says on one line that they are unchecked', async () => {
    const r = await withoutCelcost(() => cli(['policies', 'templates', '-o', 'json']));
    assert.equal(r.code, 0);
    assert.equal(JSON.parse(r.out).items.length, 12);
    assert.equal(
      r.err,
      "policies: not checked with the apiserver's CEL: CELCOST=/nonexistent/celcost does not exist; point it at the binary tools/celcost/build.sh prints\n",
    );
  });

  it('--verify always fails with one line and writes nothing; --verify never says nothing', async () => {
    const always = await withoutCelcost(() => cli(['policies', 'templates', '--verify', 'always']));
    assert.equal(always.code, 1);
    assert.equal(always.out, '');
    assert.match(always.err, /^[^\n]*--verify always: CELCOST=\/nonexistent\/celcost does not exist[^\n]*\n$/);
    const never = await withoutCelcost(() => cli(['policies', 'templates', '--verify', 'never']));
    assert.equal(never.code, 0);
    assert.equal(never.err, '');
  });

  it('lint --policies says the cost is unchecked', async () => {
    const r = await withoutCelcost(() => cli(['lint', 'templates', '--policies']));
    assert.equal(r.code, 0);
    assert.match(r.out, /\npolicy: CEL cost unchecked: CELCOST=\/nonexistent\/celcost does not exist[^\n]*\n$/);
  });
});
