import type { TemplateFault } from '../errors.js';
import type { Container } from '../kube/types.js';
import { placeholdersOf } from '../templates/placeholders.js';
import type { CompiledTemplate } from '../templates/template.js';
import { DeploymentPod, KeysRead, valueFaults } from '../templates/values.js';

/**
 * What lint says of a template's placeholders beyond what the loader refuses: a value
 * that Kubernetes refuses for the pods that lack a label or annotation the placeholder reads (they
 * would be denied), and `{{ pod.name }}` where a program reads it as the pod's name.
 */

/** Values Kubernetes refuses for a pod without a label or annotation a placeholder reads. */
export function absentKeyWarnings(t: CompiledTemplate): TemplateFault[] {
  if (t.reads.labels.size === 0 && t.reads.annotations.size === 0) return [];
  return valueFaults(t.spec, KeysRead.Absent).map((f) => ({ file: t.file, template: t.name, ...f }));
}

const POD_NAME = `{{ pod.name }} is the generateName (e.g. "${DeploymentPod.podName}") for a controller's pods, the same in every replica, not the pod's name`;

/**
 * `{{ pod.name }}` in a container's env, args or command: for a Deployment's pods it expands to the
 * generateName, since the apiserver names a pod only after admission; the downward API gives the
 * real name (`valueFrom.fieldRef: metadata.name`), and args and command read an env var as `$(NAME)`.
 */
export function podNameWarnings(t: CompiledTemplate): TemplateFault[] {
  const out: TemplateFault[] = [];
  const warn = (path: string, fix: string): void => void out.push({ file: t.file, template: t.name, path, message: `${POD_NAME}; ${fix}` });
  const envFix = 'use the downward API instead: valueFrom: {fieldRef: {fieldPath: metadata.name}}';
  const argFix = 'set an env var from the downward API (valueFrom.fieldRef: metadata.name) and write $(THAT_VAR) here';
  const inEnv = (env: readonly Record<string, unknown>[] | undefined, at: string): void =>
    (env ?? []).forEach((e, i) => {
      if (typeof e['value'] === 'string' && usesPodName(e['value'])) warn(`${at}/${i}/value`, envFix);
    });
  const inContainers = (list: readonly Container[], at: string): void =>
    list.forEach((c, i) => {
      inEnv(c.env, `${at}/${i}/env`);
      for (const field of ['command', 'args'] as const) {
        const items = c[field];
        if (Array.isArray(items)) items.forEach((s, j) => typeof s === 'string' && usesPodName(s) && warn(`${at}/${i}/${field}/${j}`, argFix));
      }
    });
  inContainers(t.spec.initContainers, '/spec/initContainers');
  inContainers(t.spec.containers, '/spec/containers');
  inEnv(t.spec.env, '/spec/env');
  return out;
}

function usesPodName(text: string): boolean {
  return placeholdersOf(text).includes('pod.name');
}
