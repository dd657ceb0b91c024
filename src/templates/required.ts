import type { TemplateFault } from '../errors.js';
import { selectorMatches } from '../kube/selectors.js';
import type { CompiledTemplate, RequiredSpec } from './template.js';

/**
 * Required (mandatory) templates: `spec.required` on a cluster-wide template (a file of the
 * templates directory, or a SidecarTemplate in the injector's namespace) makes it part of every
 * opted-in pod of the namespaces its `namespaceSelector` takes (all of them without one). A pod
 * cannot leave it out by naming other templates, by its namespace's defaults, or by an override;
 * a namespace's object cannot shadow it or be required itself (clusterSet refuses it, with
 * requiredFaults); /validate refuses a pod without it (REQUIRED_SIDECAR_MISSING). Held by
 * test/templates/required.test.ts and test/server/required.test.ts.
 */

/**
 * The one namespace label the injector knows without reading namespaces: the apiserver sets it on
 * every namespace to the namespace's name, and nobody can change it (NamespaceDefaultLabelName).
 * The injector has no access to namespaces, so a selector on any other label could not be decided
 * and is refused at load.
 */
export const NAMESPACE_NAME_LABEL = 'kubernetes.io/metadata.name';

/** Faults of `spec.required` as written: a selector on another label, or one the apiserver would refuse; the image override. */
export function requiredSpecFaults(required: RequiredSpec | undefined, overrides: readonly string[] | undefined, fault: (path: string, message: string) => void): void {
  if (required === undefined) return;
  if (overrides?.includes('image')) fault('/spec/overrides', 'a required template cannot let pods override its image (a pod could run anything in its place): remove image from overrides');
  const selector = required.namespaceSelector;
  if (selector === undefined) return;
  const keys = [...Object.keys(selector.matchLabels ?? {}), ...(selector.matchExpressions ?? []).map((r) => r.key)];
  const other = keys.find((k) => k !== NAMESPACE_NAME_LABEL);
  if (other !== undefined) {
    fault('/spec/required/namespaceSelector', `selects on label "${other}": the injector does not read namespaces, so a required template selects namespaces by "${NAMESPACE_NAME_LABEL}" (their name) alone`);
    return;
  }
  try {
    selectorMatches(selector, { [NAMESPACE_NAME_LABEL]: '' });
  } catch (err) {
    fault('/spec/required/namespaceSelector', err instanceof Error ? err.message : String(err));
  }
}

/** Whether `t` is required for the pods of `namespace`. */
export function requiredIn(t: CompiledTemplate, namespace: string): boolean {
  if (t.required === undefined) return false;
  return selectorMatches(t.required.namespaceSelector, { [NAMESPACE_NAME_LABEL]: namespace });
}

/** Why `t` is in a pod of `namespace`, for messages: one clause. */
export function whyRequired(t: CompiledTemplate, namespace: string): string {
  const where = t.required?.namespaceSelector === undefined ? 'in every namespace' : `in namespace ${namespace} (its namespaceSelector takes it)`;
  return `template "${t.name}" is required ${where} by the platform's spec.required`;
}

/**
 * Why clusterSet refuses a namespace's object: it is required itself (only the platform's
 * cluster-wide templates can be), or it has the name of a required cluster-wide template, which it
 * would shadow for its namespace's pods. `wideRequired`: the names of the required cluster-wide templates.
 */
export function requiredFaults(t: CompiledTemplate, home: string, wideRequired: ReadonlySet<string>): TemplateFault[] {
  const namespace = t.namespace;
  if (namespace === undefined || namespace === home) return [];
  if (t.required !== undefined) return [{ file: t.file, template: t.name, path: '/spec/required', message: `only a cluster-wide template (in namespace ${home} or the templates directory) can be required; remove spec.required` }];
  if (wideRequired.has(t.name)) return [{ file: t.file, template: t.name, path: '/metadata/name', message: `the cluster-wide template "${t.name}" is required, and a namespace's template cannot replace it; rename this one` }];
  return [];
}
