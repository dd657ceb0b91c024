/**
 * The repository part of an image reference, normalized the way the container runtime resolves it:
 * `nginx`, `nginx:1.27` and `docker.io/library/nginx@sha256:...` are all `docker.io/library/nginx`.
 * Another webhook may pin a tag or a digest; it may not swap the repository.
 */
export function imageRepository(image: string): string {
  let ref = image.trim();
  const at = ref.indexOf('@');
  if (at >= 0) ref = ref.slice(0, at);
  const slash = ref.lastIndexOf('/');
  const colon = ref.lastIndexOf(':');
  if (colon > slash) ref = ref.slice(0, colon);
  const first = ref.split('/')[0] ?? '';
  const hasRegistry = ref.includes('/') && (first.includes('.') || first.includes(':') || first === 'localhost');
  if (hasRegistry) return ref === first ? ref : ref.replace(/^index\.docker\.io\//, 'docker.io/');
  return ref.includes('/') ? `docker.io/${ref}` : `docker.io/library/${ref}`;
}
