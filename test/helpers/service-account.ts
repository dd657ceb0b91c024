/**
 * The projected token volume the apiserver's ServiceAccount admission plugin adds to every pod that
 * mounts its token (plugin/pkg/admission/serviceaccount), named as the plugin names it,
 * `kube-api-access-<5 characters>`. One copy for the tests' running pods, the corpus' admission
 * view and the benchmark's pods.
 */
export function kubeApiAccessVolume(name: string): { name: string; projected: object } {
  return {
    name,
    projected: {
      defaultMode: 420,
      sources: [
        { serviceAccountToken: { expirationSeconds: 3607, path: 'token' } },
        { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
        { downwardAPI: { items: [{ path: 'namespace', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } }] } },
      ],
    },
  };
}
