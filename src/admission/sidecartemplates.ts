import { isDeepStrictEqual } from 'node:util';
import { InjectorError } from '../errors.js';
import { Reason } from '../inject/policy.js';
import { isObject } from '../kube/types.js';
import { checkObject, faultsLine, LAST_APPLIED, objectKey, SidecarTemplateResource, type TemplateObject } from '../templates/cluster.js';
import { requiredFaults } from '../templates/required.js';
import type { ReviewRequest } from './codec.js';
import { SIDECARTEMPLATES_PATH } from './endpoints.js';
import type { ReviewHandler } from './pipeline.js';
import { allowed, Decision, denied, passed } from './verdict.js';

/** No cluster-wide template is known to a review of one object: the rules that need the others stay with the store. */
const NO_NAMES: ReadonlySet<string> = new Set();

/**
 * The SidecarTemplate webhook: a CREATE or UPDATE of a SidecarTemplate that the injector would
 * refuse to load is denied with the faults its `Loaded` condition would carry, so a broken version
 * is never stored and a replica that starts later never meets one. It judges by the store's own
 * per-object check (checkObject: over MAX_OBJECT_BYTES refused uncompiled, else the loader's
 * schema, placeholders, names, values), and, with `home` (the injector's namespace, when it serves
 * SidecarTemplates), by requiredFaults' rule that only its namespace's templates may be required.
 * What depends on other objects (defaults that clash, a name that shadows a required template, the
 * byte budgets) stays with the store and the Loaded condition: a review sees one object.
 * Everything else passes: DELETE, the status subresource the injector itself writes, and an UPDATE
 * that leaves what the store reads as it was (a finalizer or an owner removed from an object stored
 * before the webhook was installed: refusing it would change nothing the injector serves).
 * test/server/sidecartemplates-webhook.test.ts holds each case over real TLS.
 */
export function sidecarTemplateReview(home: string | undefined): ReviewHandler {
  return (req) => {
    if (!isSidecarTemplate(req)) throw new InjectorError('SIDECARTEMPLATE_REVIEW_WRONG_KIND', [SIDECARTEMPLATES_PATH, describeKind(req)]);
    if ((req.subResource ?? '') !== '' || (req.operation !== 'CREATE' && req.operation !== 'UPDATE')) return passed(Decision.Skipped, Reason.NotTemplateWrite);
    const obj = templateObject(req.object, req);
    if (req.operation === 'UPDATE' && sameTemplate(obj, req.oldObject)) return passed(Decision.Skipped, Reason.NotTemplateWrite);
    const result = checkObject(obj);
    const faults = result.ok ? (home === undefined ? [] : requiredFaults(result.template, home, NO_NAMES)) : result.faults;
    const name = obj.metadata.name ?? '';
    if (faults.length === 0) return allowed(Reason.TemplateLoadable, [name], true);
    const err = new InjectorError('SIDECARTEMPLATE_INVALID', [objectKey(obj), faultsLine(faults)]);
    return denied(err, err.code, undefined, [name]);
  };
}

/** True when `old`, the object as stored, holds the same template as `obj`: spec, labels and annotations but kubectl's last-applied copy (what compileObject and boundedObject read). */
function sameTemplate(obj: TemplateObject, old: unknown): boolean {
  if (!isObject(old) || !isObject(old['metadata'])) return false;
  const stored = old as unknown as TemplateObject;
  const content = (o: TemplateObject): unknown => {
    const { [LAST_APPLIED]: _applied, ...annotations } = o.metadata.annotations ?? {};
    return { spec: o.spec, labels: o.metadata.labels ?? {}, annotations };
  };
  return isDeepStrictEqual(content(obj), content(stored));
}

/** The object as the store reads it; the request's name and namespace where the object leaves them out. */
function templateObject(object: unknown, req: ReviewRequest): TemplateObject {
  if (!isObject(object) || !isObject(object['metadata']))
    throw new InjectorError('REVIEW_INVALID', ['request.object must be a SidecarTemplate object with metadata']);
  const metadata = object['metadata'] as TemplateObject['metadata'];
  const name = typeof metadata.name === 'string' ? metadata.name : req.name;
  const namespace = typeof metadata.namespace === 'string' ? metadata.namespace : req.namespace;
  return {
    ...(object as unknown as TemplateObject),
    metadata: { ...metadata, ...(name !== undefined && { name }), ...(namespace !== undefined && { namespace }) },
  };
}

function isSidecarTemplate(req: ReviewRequest): boolean {
  const { group, plural } = SidecarTemplateResource;
  return (req.resource?.group ?? '') === group && req.resource?.resource === plural;
}

function describeKind(req: ReviewRequest): string {
  const { group, resource } = req.resource ?? {};
  return resource === undefined ? 'a review without request.resource' : `${String(resource)}${group ? `.${String(group)}` : ''}`;
}
