import { compileTemplateSet, type TemplateSet } from '../../src/templates/load.js';
import { optedInPod } from './review.js';

/** A template set compiled from SidecarTemplate documents, as the loader compiles files. */
export function set(...docs: string[]): TemplateSet {
  return compileTemplateSet(
    docs.map((text, i) => ({ file: `t${i}.yaml`, text })),
    'test',
  );
}

/** A SidecarTemplate document with the given name and spec body (indented two spaces). */
export function template(name: string, spec: string): string {
  return `apiVersion: sidecar-injector.io/v1alpha1\nkind: SidecarTemplate\nmetadata:\n  name: ${name}\nspec:\n${spec}`;
}

/** Overridable, native in Job pods, two containers. */
export const agent = template(
  'agent',
  `  nativeSidecar: jobs
  overrides: [image, cpu, memory]
  containers:
    - name: agent
      image: registry.example.com/agent:1.0
      resources:
        requests: { cpu: 100m, memory: 64Mi }
        limits: { cpu: 200m, memory: 128Mi }
    - name: agent-helper
      image: registry.example.com/helper:1.0
`,
);

/** Allows no override; reads one of its own annotations through a placeholder. */
export const locked = template(
  'locked',
  `  containers:
    - name: locked
      image: registry.example.com/locked:1.0
      env:
        - name: LEVEL
          value: "{{ pod.annotations['locked.sidecar-injector.io/level'] | default 'info' }}"
`,
);

export const templates = set(agent, locked);
export const jobOwner = [{ apiVersion: 'batch/v1', kind: 'Job', name: 'nightly-28811520', uid: 'u', controller: true }];

/** An opted-in pod naming agent and locked, with extra annotations and metadata. */
export function podWith(annotations: Record<string, string>, extra: object = {}): any {
  const pod = optedInPod({ annotations: { 'sidecar-injector.io/templates': 'agent,locked', ...annotations } });
  return { ...pod, metadata: { ...pod.metadata, ...extra } };
}
