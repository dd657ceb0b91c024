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
 *
 * The maps are shared and frozen: the decisions and reasons are a fixed set, and the template names
 * come as one frozen list per selection (the injection plan's, a set's defaults), so one map is kept
 * per list and pair rather than one made per review; it is dropped with the list. A list that is
 * not frozen could change after its map was made, so it gets a map of its own.
 */
export function auditAnnotations(decision: string, reason: string, templates: readonly string[]): Readonly<Record<string, string>> {
  if (templates.length > 0 && !Object.isFrozen(templates)) return makeAnnotations(decision, reason, templates);
  let byDecision = templates.length === 0 ? withoutTemplates : kept.get(templates);
  if (byDecision === undefined) kept.set(templates, (byDecision = new Map()));
  let byReason = byDecision.get(decision);
  if (byReason === undefined) byDecision.set(decision, (byReason = new Map()));
  let annotations = byReason.get(reason);
  if (annotations === undefined) byReason.set(reason, (annotations = makeAnnotations(decision, reason, templates)));
  return annotations;
}

type Kept = Map<string, Map<string, Readonly<Record<string, string>>>>;
const kept = new WeakMap<readonly string[], Kept>();
const withoutTemplates: Kept = new Map();

function makeAnnotations(decision: string, reason: string, templates: readonly string[]): Readonly<Record<string, string>> {
  const annotations: Record<string, string> = { [AuditKeys.decision]: decision, [AuditKeys.reason]: reason };
  if (templates.length > 0) annotations[AuditKeys.templates] = templates.join(',');
  return Object.freeze(annotations);
}
