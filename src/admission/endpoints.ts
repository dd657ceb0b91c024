import { OptInScope } from '../inject/policy.js';

/** The handlers: the mutating one injects, the validating one guarantees the sidecars, the SidecarTemplate one refuses a template the injector would not load. */
export const HandlerKind = { Mutate: 'mutate', Validate: 'validate', SidecarTemplate: 'sidecartemplate' } as const;
export type HandlerKind = (typeof HandlerKind)[keyof typeof HandlerKind];

/** The path of the SidecarTemplate webhook (manifests/components/sidecartemplates, the chart's templates.source). */
export const SIDECARTEMPLATES_PATH = '/validate/sidecartemplates';

/** One review path: the handler that answers it and who may opt a pod in there (none where no pod is reviewed). */
export interface Endpoint {
  readonly path: string;
  readonly kind: HandlerKind;
  readonly scope?: OptInScope;
}

/**
 * The review endpoints: pods that opted in themselves, pods of namespaces that opted in,
 * and every pod of the namespaces the platform enforces its required templates in (the optional
 * required webhooks: manifests/components/required, the chart's `required` values); and the writes
 * of SidecarTemplate objects (manifests/components/sidecartemplates, the chart's templates.source).
 * Adding an endpoint is one row: the server routes from this table, the handlers are
 * built from it, and the metrics take its kind as their endpoint label.
 */
export const Endpoints: readonly Endpoint[] = Object.freeze([
  { path: '/mutate', kind: HandlerKind.Mutate, scope: OptInScope.Pod },
  { path: '/validate', kind: HandlerKind.Validate, scope: OptInScope.Pod },
  { path: '/mutate/namespace', kind: HandlerKind.Mutate, scope: OptInScope.Namespace },
  { path: '/validate/namespace', kind: HandlerKind.Validate, scope: OptInScope.Namespace },
  { path: '/mutate/required', kind: HandlerKind.Mutate, scope: OptInScope.Required },
  { path: '/validate/required', kind: HandlerKind.Validate, scope: OptInScope.Required },
  { path: SIDECARTEMPLATES_PATH, kind: HandlerKind.SidecarTemplate },
]);

/** The endpoint label of the metrics for anything that is not a review path. */
const OTHER_ENDPOINT = 'other';

const labels: ReadonlyMap<string, string> = new Map(Endpoints.map((e) => [e.path, e.kind]));

/**
 * The metrics' endpoint label of a path: its handler kind, so the namespace opt-in paths count with
 * /mutate and /validate and the alerts on validator rejections cover them (the log line names the
 * path). Any other path is `other`: a scanner probing random paths must not create a time series
 * per path.
 */
export function endpointLabel(path: string): string {
  return labels.get(path) ?? OTHER_ENDPOINT;
}
