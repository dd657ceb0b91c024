/**
 * Every error the product reports, in one table: a stable code, the HTTP status it maps to at the
 * edge, and a message a user can act on. Modelled on Fastify's lib/errors.js.
 */
export const ErrorCodes = {
  /** The request body is not `application/json` (the apiserver always sends JSON). */
  UNSUPPORTED_MEDIA_TYPE: { status: 415, message: 'Content-Type must be application/json, got %s' },
  BODY_EMPTY: { status: 400, message: 'request body is empty; expected an AdmissionReview' },
  BODY_MALFORMED: { status: 400, message: 'request body is not valid JSON: %s' },
  BODY_TOO_LARGE: { status: 413, message: 'request body exceeds the limit of %s bytes' },
  BODY_ABORTED: { status: 400, message: 'request body was not received completely: %s' },
  /** A chunked body: the apiserver always sends Content-Length. */
  LENGTH_REQUIRED: { status: 411, message: 'request body has no Content-Length (chunked transfer encoding); send the review whole with its length' },
  /** A body still arriving after --body-timeout (stalled bodies must not hold the server). */
  BODY_TIMEOUT: { status: 408, message: 'request body not received within %s s; a review must be sent at once' },
  REVIEW_INVALID: { status: 400, message: 'not a valid AdmissionReview: %s' },
  NOT_FOUND: {
    status: 404,
    message:
      'no such path %s; the webhook serves POST /mutate, /validate, /mutate/namespace, /validate/namespace, /mutate/required, /validate/required and /validate/sidecartemplates',
  },
  METHOD_NOT_ALLOWED: { status: 405, message: 'method %s is not allowed on %s; use %s' },
  OVERLOADED: { status: 429, message: 'too many reviews in progress; retry shortly' },
  INTERNAL: { status: 500, message: 'internal error while handling the review: %s' },
  /** Admission denials (answered with allowed: false, not an HTTP error). */
  TEMPLATE_UNKNOWN: { status: 400, message: 'unknown sidecar template(s) %s named in annotation %s; known templates: %s' },
  TEMPLATE_CONFLICT: { status: 400, message: 'the selected templates conflict: %s' },
  TEMPLATE_VOLUME_MISSING: { status: 400, message: 'the injected pod would mount volumes that neither the templates nor the pod define: %s' },
  OVERRIDE_REFUSED: { status: 400, message: '%s' },
  /** A placeholder rendered a value Kubernetes refuses where it lands: denied here, naming the template, never by the apiserver. */
  TEMPLATE_VALUE_INVALID: { status: 400, message: '%s' },
  SIDECARS_MISSING: { status: 403, message: 'pod opted in to sidecar injection but is missing: %s' },
  SIDECARS_NOT_INJECTED: {
    status: 403,
    message:
      "pod opted in to sidecar injection but was never injected (no %s annotation): the injector's mutating webhook did not answer for it (down, unreachable or slower than its timeoutSeconds; it fails open); a controller creates the pod again by itself, create a bare pod again once an injector replica is ready; missing: %s",
  },
  /** A template the platform made mandatory (spec.required) is not in the pod: /validate refuses it, whatever the pod named. */
  REQUIRED_SIDECAR_MISSING: {
    status: 403,
    message:
      '%s, and the pod lacks it (%s); create the pod through the injector, whose /mutate adds it (it keeps a container or volume the pod already has under a name the template uses: remove that one from the pod)',
  },
  /** A pod UPDATE (kubectl set image) would swap a mandatory sidecar's image: /validate/required refuses it. */
  REQUIRED_SIDECAR_CHANGED: {
    status: 403,
    message: '%s, and this update %s; leave its image as the template injects it (the platform changes it by changing the template, for new pods)',
  },
  /** The SidecarTemplate webhook: a write the injector would refuse to load, denied before it is stored (src/admission/sidecartemplates.ts). */
  SIDECARTEMPLATE_INVALID: { status: 400, message: 'the injector would not serve SidecarTemplate %s: %s' },
  /** A review sent to the SidecarTemplate webhook for another kind: its rules are wrong. */
  SIDECARTEMPLATE_REVIEW_WRONG_KIND: {
    status: 400,
    message: '%s reviews sidecar-injector.io SidecarTemplate objects only, got %s; send other kinds to the paths of their own webhooks',
  },
  /** Bounded cost per review: refused before any work that grows with the pod. */
  POD_OVER_KUBERNETES_LIMIT: { status: 400, message: 'the apiserver would refuse this pod after admission: %s (%s)' },
  POD_OVER_LIMIT: {
    status: 400,
    message: 'the pod has %s, over the limit of %s (--%s); no real workload needs that many, ask the operator to raise the flag if yours does',
  },
  /** The pod's annotations fit Kubernetes' limit, but not with what the injection adds (the apiserver's refusal would not name the injector). */
  ANNOTATIONS_TOO_LARGE: {
    status: 400,
    message:
      "the pod's annotations would take %s bytes once injected (the status annotation %s alone takes %s), over Kubernetes' limit of %s bytes (256 KiB, keys plus values); remove or shorten some of the pod's annotations",
  },
  /** Pod-level resources the pod fits, but not with the sidecars' own (the apiserver's refusal would not name the injector). */
  POD_RESOURCES_EXCEEDED: {
    status: 400,
    message:
      "the pod's own spec.resources would not cover its containers once the sidecars are injected: %s; Kubernetes refuses such a pod (validatePodResourceConsistency), so raise spec.resources by the sidecars' share or remove it",
  },
  /** A template's rendering for this pod over the patch limit, found before anything is built (RenderBudget in src/templates/template.ts). */
  RENDERING_TOO_LARGE: { status: 400, message: 'template "%s" would add more than %s bytes to the pod (--%s): %s' },
  PATCH_TOO_LARGE: { status: 400, message: 'the patch that injects the sidecars would be %s bytes, over the limit of %s (--%s)' },
  /** The CLI applies /mutate's own patch as the apiserver does; a patch that does not apply fails the pod even with failurePolicy Ignore. */
  PATCH_NOT_APPLICABLE: {
    status: 500,
    message: "the apiserver could not apply the webhook's JSON patch (operation %s, %s): %s; this is a bug in the injector, please report it",
  },
  /** Start-up and reload faults. */
  TEMPLATE_INVALID: { status: 500, message: '%s' },
  TEMPLATES_EMPTY: { status: 500, message: 'no sidecar templates (*.yaml, *.yml) found in %s' },
  TEMPLATES_DIR_MISSING: {
    status: 500,
    message: 'templates directory %s does not exist; pass --templates-dir (or set SIDECAR_INJECTOR_TEMPLATES_DIR) to a directory of SidecarTemplate YAML files',
  },
  CONFIG_INVALID: { status: 500, message: 'invalid configuration: %s' },
  CERT_INVALID: { status: 500, message: 'cannot load the serving certificate: %s' },
  /** Command-line authoring tools (inject, lint, explain). */
  INPUT_INVALID: { status: 400, message: 'cannot read %s: %s' },
  USAGE: { status: 400, message: '%s' },
  /** `policies --verify`: what the apiserver's CEL (tools/celcost) says it would refuse. */
  POLICY_REFUSED: { status: 400, message: 'the apiserver would refuse %s; nothing written: fix the template, or leave it to the webhook' },
  CELCOST_MISSING: { status: 500, message: '--verify always: %s' },
  CELCOST_FAILED: { status: 500, message: 'celcost failed: %s; build it again with tools/celcost/build.sh, or pass --verify never' },
  /** A template value the compiler cannot write as CEL (src/policy/cel.ts): its JSON path in the template, and why. */
  CEL_VALUE_UNWRITABLE: { status: 500, message: '%s: %s' },
  /** One template that does not compile to a policy (src/policy/compile.ts): the others compile and sync; the webhook injects it in hybrid. */
  TEMPLATE_NOT_COMPILED: { status: 500, message: 'template "%s" does not compile to a policy: %s' },
  /** Certificate bootstrap through the Kubernetes API. */
  KUBE_CONFIG_INVALID: { status: 500, message: 'cannot configure the Kubernetes client: %s; pass --kubeconfig or run in a pod with a ServiceAccount' },
  KUBE_API_FAILED: { status: 500, message: 'Kubernetes API call %s failed: %s' },
  /** sidecar-injector drift. */
  TEMPLATES_CONFIGMAP_MISSING: {
    status: 500,
    message: 'ConfigMap %s not found; name the installed templates with --templates-configmap NAMESPACE/NAME, or compare with a directory with --templates-dir',
  },
  CERT_SECRET_CONTENDED: { status: 500, message: 'gave up on Secret %s after %s conflicting writes; another writer keeps changing it' },
  CERT_SECRET_INVALID: { status: 500, message: 'Secret %s holds no usable certificate: %s' },
  /** --mode policy and hybrid: the policies cannot be kept in sync (src/policy/sync.ts). */
  POLICY_API_NOT_SERVED: {
    status: 500,
    message:
      'the cluster does not serve %s: admissionregistration.k8s.io/v1 serves mutatingadmissionpolicies from Kubernetes 1.36, v1beta1 in 1.34 and 1.35 with the beta API enabled (--runtime-config=admissionregistration.k8s.io/v1beta1=true), v1 serves validatingadmissionpolicies from 1.30; on an older cluster run --mode webhook',
  },
  POLICY_API_FORBIDDEN: {
    status: 500,
    message:
      "the injector may not %s %s (403 Forbidden): give its ServiceAccount get, list, create, patch and delete on mutatingadmissionpolicies, mutatingadmissionpolicybindings, validatingadmissionpolicies and validatingadmissionpolicybindings (the chart's RBAC for mode policy and hybrid)",
  },
  /** One compiled object the apiserver refused (400, 422): the sync applies the others and says which template to fix. */
  POLICY_OBJECT_REFUSED: { status: 500, message: 'the apiserver refused %s %s: %s; the other policies are applied, fix the template it is compiled from' },
  /** A fault of the sync that is none of the above (a bug of ours): retried with the backoff. */
  POLICY_SYNC_FAILED: { status: 500, message: 'the policy sync failed unexpectedly: %s; it is retried, please report it with this log line' },
  /** A webhook configuration's label selector the API server would refuse (src/kube/selectors.ts). */
  SELECTOR_INVALID: { status: 500, message: 'invalid label selector requirement on key %s: %s' },
} as const;

export type ErrorCode = keyof typeof ErrorCodes;

/** The HTTP statuses of the table: the only ones an error is ever answered with. */
export type ErrorStatus = (typeof ErrorCodes)[ErrorCode]['status'];

/** An error with a stable code and an HTTP status; its message is safe to show to a client. */
export class InjectorError extends Error {
  readonly code: ErrorCode;
  readonly status: ErrorStatus;

  constructor(code: ErrorCode, args: readonly unknown[] = [], options?: ErrorOptions) {
    super(format(ErrorCodes[code].message, args), options);
    this.name = 'InjectorError';
    this.code = code;
    this.status = ErrorCodes[code].status;
  }
}

/**
 * Runs a step whose InjectorError is an answer to the user (a denial), not a failure of the
 * webhook: returns the error instead of throwing it; any other error is thrown on.
 */
export function attempt<T>(step: () => T): T | InjectorError {
  try {
    return step();
  } catch (err) {
    if (err instanceof InjectorError) return err;
    throw err;
  }
}

/** `err` itself when it is an InjectorError; anything else (a bug of ours) as INTERNAL, naming it, with it as the cause. */
export function asInjectorError(err: unknown): InjectorError {
  return err instanceof InjectorError ? err : new InjectorError('INTERNAL', [err instanceof Error ? err.message : String(err)], { cause: err });
}

/** Shorthand for `new InjectorError(code, args)`. */
export function injectorError(code: ErrorCode, ...args: unknown[]): InjectorError {
  return new InjectorError(code, args);
}

function format(template: string, args: readonly unknown[]): string {
  let i = 0;
  return template.replace(/%s/g, () => String(args[i++] ?? ''));
}

/** One fault found in a template file: where it is and what is wrong. */
export interface TemplateFault {
  readonly file: string;
  readonly template?: string;
  /** JSON pointer inside the document, e.g. `/spec/containers/0/image`. */
  readonly path: string;
  readonly message: string;
  /** 1-based position in the file, when known. */
  readonly line?: number;
  readonly column?: number;
}

/** Formats a fault as `file:line:column: template "x": /json/path: message`. */
export function formatFault(f: TemplateFault): string {
  const where = f.line === undefined ? f.file : `${f.file}:${f.line}:${f.column ?? 1}`;
  const name = f.template === undefined ? '' : ` template "${f.template}":`;
  const path = f.path === '' ? '' : ` ${f.path}:`;
  return `${where}:${name}${path} ${f.message}`;
}

/** A template set that failed to load; carries every fault found, not just the first. */
export class TemplateSetError extends Error {
  readonly code = 'TEMPLATE_INVALID' as const;
  readonly faults: readonly TemplateFault[];

  constructor(faults: readonly TemplateFault[]) {
    super(`invalid sidecar templates:\n${faults.map((f) => `  ${formatFault(f)}`).join('\n')}`);
    this.name = 'TemplateSetError';
    this.faults = faults;
  }
}
