import type { CompiledTemplate, RenderedTemplate } from '../templates/template.js';
import { NativeSidecar } from '../templates/template.js';

/**
 * A Job's pod completes when all its regular containers have terminated (with restartPolicy Never
 * or OnFailure); a sidecar that serves for as long as the pod lives never does, so the Job never
 * finishes and a CronJob piles up running Jobs. A native sidecar (an init container with
 * restartPolicy: Always, KEP-753, on by default since Kubernetes 1.29) is stopped by the kubelet
 * once the regular containers are done, so it lets the Job complete.
 */

/**
 * The warning for a template rendered for a Job's pod, when it adds regular containers (they keep the
 * pod, and so the Job, from completing); undefined when it adds none. Lint, explain and the mutating
 * handler all use it, so they say the same.
 */
export function jobCompletionWarning(r: RenderedTemplate): string | undefined {
  if (r.nativeSidecar || r.containers.length === 0) return undefined;
  const names = r.containers.map((c) => `"${c.name}"`).join(', ');
  return `template "${r.name}" adds ${names} as a regular container to a Job's pod, which then never completes; set nativeSidecar: jobs (or true) in the template`;
}

/** True when the template, as written, would add regular containers to a Job's pod. */
export function keepsJobsRunning(t: CompiledTemplate): boolean {
  return t.nativeMode === NativeSidecar.Never && t.spec.containers.length > 0;
}
