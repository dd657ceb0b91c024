import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { compileTemplateSet } from '../../src/templates/load.js';
import { mutate, podReview } from '../helpers/review.js';
import { admissionView } from '../corpus/admission-view.js';
import { corpusManifests, DefaultNamespace, SidecarsDir } from '../corpus/corpus.js';

/**
 * A warning means something is wrong for this pod. Every corpus pod (real-world manifests), both as
 * the apiserver sends it (the ServiceAccount plugin's token added) and as `inject` reads it (the
 * manifest before admission), is injected with each corpus sidecar and with the documentation's own
 * templates (docs/templates.md: a token shared with the pod, `exclude` of proxies and exporters). A
 * warning it gets must be one of the kinds below, each of which names a real fault of that pod with
 * that template; anything else on these healthy pods is a bug.
 */
const DOCS_TEMPLATES = `apiVersion: sidecar-injector.io/v1alpha1
kind: SidecarTemplate
metadata: {name: token-agent}
spec:
  nativeSidecar: true
  serviceAccountToken: true
  containers:
    - {name: token-agent, image: hashicorp/vault:1.15.2}
---
apiVersion: sidecar-injector.io/v1alpha1
kind: SidecarTemplate
metadata: {name: otel}
spec:
  nativeSidecar: true
  appContainers:
    exclude: [istio-proxy, linkerd-proxy, exporter]
  env:
    - {name: OTEL_EXPORTER_OTLP_ENDPOINT, value: "http://localhost:4317"}
  containers:
    - {name: otel-collector, image: otel/opentelemetry-collector:0.98.0}
`;

/** The warnings that name a real fault, with why it is one. */
const MEANINGFUL: readonly { readonly pattern: RegExp; readonly why: string }[] = [
  { pattern: /adds "[^"]+" as a regular container to a Job's pod, which then never completes/, why: 'the Job would never finish' },
  { pattern: /^volume "[^"]+" of template "[^"]+" already exists in the pod and differs/, why: "the sidecar mounts the pod's volume, not its own" },
  {
    pattern: /^container "[^"]+" of template "[^"]+" already exists in the pod and differs/,
    why: 'the pod runs its own container of that name instead of the sidecar',
  },
  {
    pattern: /^annotation "[^"]+" of template "[^"]+" is already set on the pod/,
    why: "the template's annotation (a scrape port of the sidecar's) does not apply",
  },
  { pattern: /^port \d+\/\w+ of sidecar "[^"]+" .* is also declared by container/, why: 'two containers bind one port' },
];

const set = compileTemplateSet(
  [
    ...readdirSync(SidecarsDir).map((file) => ({ file: join(SidecarsDir, file), text: readFileSync(join(SidecarsDir, file), 'utf8') })),
    { file: 'docs.yaml', text: DOCS_TEMPLATES },
  ],
  'corpus',
);

/** The manifest's pod as `inject` reads it: the pod template of a workload, opted in, before any admission plugin. */
function asInjectReadsIt(view: { pod: any }): any {
  const pod = structuredClone(view.pod);
  pod.spec.volumes = (pod.spec.volumes ?? []).filter((v: any) => !String(v.name).startsWith('kube-api-access-'));
  for (const c of [...(pod.spec.containers ?? []), ...(pod.spec.initContainers ?? [])])
    c.volumeMounts = c.volumeMounts?.filter((m: any) => !String(m.name).startsWith('kube-api-access-'));
  return pod;
}

describe('warnings on real-world pods', () => {
  it('are only warnings that name a fault of that pod with that template', () => {
    const wrong: string[] = [];
    let checked = 0;
    for (const m of corpusManifests()) {
      for (const t of set.templates.keys()) {
        const view = admissionView(m.object, [t], DefaultNamespace);
        for (const [how, pod] of [
          ['admitted', view.pod],
          ['before admission', asInjectReadsIt(view)],
        ] as const) {
          const { response } = mutate(podReview(pod, { namespace: view.namespace }).request, set);
          if (response.allowed !== true) continue;
          checked++;
          for (const w of response.warnings ?? []) if (!MEANINGFUL.some((k) => k.pattern.test(w))) wrong.push(`${m.file} × ${t} (${how}): ${w}`);
        }
      }
    }
    assert.ok(checked > 1000, `${checked} injections checked`);
    assert.deepEqual(wrong, []);
  });

  it("still warn of an include name the pod lacks (a typo would leave a container without the template's env)", () => {
    const typo = compileTemplateSet(
      [{ file: 'otel.yaml', text: DOCS_TEMPLATES.split('---\n')[1]!.replace('exclude: [istio-proxy, linkerd-proxy, exporter]', 'include: [ap]') }],
      'typo',
    );
    const pod = admissionView(
      { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p' }, spec: { containers: [{ name: 'app', image: 'app:1' }] } },
      ['otel'],
      DefaultNamespace,
    ).pod;
    const { response } = mutate(podReview(pod, { namespace: DefaultNamespace }).request, typo);
    assert.deepEqual(response.warnings, ['appContainers of template "otel" names "ap", not containers of the pod']);
  });
});
