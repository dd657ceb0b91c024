/** The label and annotations that make up the user-facing contract. */
export const Keys = {
  /** Label: "true" opts a pod in, "false" (or anything else, or none) leaves it alone. */
  inject: 'sidecar-injector.io/inject',
  /** Annotation: comma-separated template names, in order; overrides the default templates. */
  templates: 'sidecar-injector.io/templates',
  /** Annotation: comma-separated container names; only those of the pod's containers get the templates' env and volumeMounts. */
  appContainers: 'sidecar-injector.io/app-containers',
  /** Annotation written by the injector: the injected template names and a digest of what was rendered. */
  status: 'sidecar-injector.io/status',
} as const;
