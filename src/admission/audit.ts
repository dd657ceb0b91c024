/**
 * Audit annotation keys. The apiserver prefixes each with the webhook's name
 * (`<webhook name>/<key>`) and records it in the audit event of the request, so each key must be
 * the name part of a qualified name (k8s.io/api admission/v1 AdmissionResponse.auditAnnotations).
 */
export const AuditKeys = {
  decision: 'decision',
  reason: 'reason',
  templates: 'templates',
} as const;

/**
 * The `auditAnnotations` of a review's answer: what was decided and why, and which templates were
 * injected (or, for /validate, required). The cluster's audit log then says why a pod did or did
 * not get its sidecars without anyone reading the injector's own logs.
 */
export function auditAnnotations(decision: string, reason: string, templates: readonly string[]): Readonly<Record<string, string>> {
  const annotations: Record<string, string> = { [AuditKeys.decision]: decision, [AuditKeys.reason]: reason };
  if (templates.length > 0) annotations[AuditKeys.templates] = templates.join(',');
  return annotations;
}
