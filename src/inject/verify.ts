import type { Container, Pod } from '../kube/types.js';
import type { CompiledTemplate } from '../templates/template.js';
import { imageRepository } from './image.js';
import { renderTemplates, type InjectionContext } from './render.js';

/**
 * Lists what the selected templates require and the pod lacks: each sidecar container by name, in
 * the right list, running the template's image repository, and each template volume by name. The
 * selection is recomputed from the pod by the caller; the status annotation is never trusted.
 */
export function missingSidecars(pod: Pod, templates: readonly CompiledTemplate[], namespace: string, context: InjectionContext = {}): string[] {
  // Rendered as the mutating handler renders them: an image override changes the expected repository.
  const rendered = renderTemplates(pod, templates, namespace, context);
  const spec = pod.spec ?? {};
  const containers = byName(spec.containers);
  const initContainers = byName(spec.initContainers);
  const volumes = new Set((spec.volumes ?? []).map((v) => v.name));
  const missing: string[] = [];
  for (const r of rendered) {
    for (const want of r.containers) {
      const found = r.nativeSidecar ? initContainers.get(want.name) : containers.get(want.name);
      const problem = checkContainer(want, found, r.nativeSidecar);
      if (problem !== undefined) missing.push(`${problem} (template "${r.name}")`);
    }
    for (const v of r.volumes) {
      if (!volumes.has(v.name)) missing.push(`volume "${v.name}" (template "${r.name}")`);
    }
  }
  return missing;
}

function checkContainer(want: Container, found: Container | undefined, native: boolean): string | undefined {
  const kind = native ? 'native sidecar' : 'container';
  if (found === undefined) return native ? `native sidecar "${want.name}" in initContainers` : `container "${want.name}"`;
  if (native && found.restartPolicy !== 'Always') return `restartPolicy: Always on native sidecar "${want.name}"`;
  const wanted = imageRepository(want.image ?? '');
  const actual = imageRepository(found.image ?? '');
  if (wanted !== actual) return `${kind} "${want.name}" with image repository ${wanted} (it runs ${found.image ?? 'no image'})`;
  return undefined;
}

function byName(list: Container[] | undefined): Map<string, Container> {
  return new Map((list ?? []).map((c) => [c.name, c]));
}
