import { parseImage } from '../kube-values/image.js';
import { celString, placeholderCel } from './cel.js';

/**
 * A template's image as CEL checks over a pod's image (a CEL string expression), as the webhook
 * compares them (src/inject/verify.ts): at CREATE the same repository (sameRepository: a later
 * webhook may pin a tag or a digest, or write the long form of the name), at UPDATE the same image
 * (sameImage: repository, tag and digest). A static image is written as one anchored RE2 pattern
 * over every spelling of its repository (`busybox`, `library/busybox`, `docker.io/library/busybox`,
 * `index.docker.io/...`), so the check is linear in the pod's image and needs no normalization in
 * CEL; the tag and digest parts follow distribution/reference's grammar, so an invalid reference
 * never holds. An image with a placeholder holds only when the pod's image is the rendered text.
 * Held by test/policy/image.test.ts (against the webhook's comparisons) and
 * test/policy/parity-required.test.ts, test/policy/required-update.test.ts (in the policies).
 */

// distribution/reference's tag and digest, as src/kube-values/image.ts reads them.
const TAG = '[\\w][\\w.-]{0,127}';
const DIGEST = '[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}';

/** The template's image as the pod gets it: CEL string (placeholders read the pod, as the mutation renders them). */
export function renderedImage(image: string): string {
  return placeholderCel(image);
}

/** CEL: `found` (a CEL string) runs the repository of the template's `image`. */
export function sameRepositoryCel(found: string, image: string): string {
  const pattern = repositoryPattern(image);
  return pattern === undefined ? `${found} == ${renderedImage(image)}` : `${found}.matches(${celString(pattern)})`;
}

/** CEL: `found` (a CEL string) is the template's `image`: its repository, tag and digest. */
export function sameImageCel(found: string, image: string): string {
  const pattern = imagePattern(image);
  return pattern === undefined ? `${found} == ${renderedImage(image)}` : `${found}.matches(${celString(pattern)})`;
}

/** The RE2 pattern of the references to the repository of a static `image`, any tag or digest; undefined for an image with a placeholder or an invalid one. */
export function repositoryPattern(image: string): string | undefined {
  const ref = staticReference(image);
  return ref === undefined ? undefined : `^(?:${spellings(ref.domain, ref.path).map(escape).join('|')})(?::${TAG})?(?:@${DIGEST})?$`;
}

/** The RE2 pattern of the references to a static `image` itself: its repository in any spelling, its tag and digest. */
export function imagePattern(image: string): string | undefined {
  const ref = staticReference(image);
  if (ref === undefined) return undefined;
  // A reference without tag or digest means the tag latest, written or not.
  const tag = ref.tag === undefined ? '' : ref.tag === 'latest' && ref.digest === undefined ? '(?::latest)?' : `:${escape(ref.tag)}`;
  const digest = ref.digest === undefined ? '' : `@${escape(ref.digest)}`;
  return `^(?:${spellings(ref.domain, ref.path).map(escape).join('|')})${tag}${digest}$`;
}

/** The repository of the template's image, for messages; the image itself when it has a placeholder. */
export function repositoryOf(image: string): string {
  return staticReference(image)?.repository ?? image;
}

function staticReference(image: string): { domain: string; path: string; repository: string; tag?: string; digest?: string } | undefined {
  if (renderedImage(image) !== celString(image)) return undefined;
  const ref = parseImage(image);
  return 'problem' in ref ? undefined : ref;
}

/**
 * Every way to write the repository that normalizes to it (normalize.go splitDockerDomain): Docker
 * Hub's with or without its domain (or the legacy index.docker.io), an official image with or
 * without `library/`; any other registry only as itself.
 */
function spellings(domain: string, path: string): string[] {
  if (domain !== 'docker.io') return [`${domain}/${path}`];
  const official = path.startsWith('library/') && path.indexOf('/', 'library/'.length) < 0;
  const paths = official ? [path, path.slice('library/'.length)] : [path];
  return paths.flatMap((p) => [p, `docker.io/${p}`, `index.docker.io/${p}`]);
}

/** Text as a literal in an RE2 pattern. */
function escape(text: string): string {
  return text.replace(/[\\^$.|?*+()[\]{}]/g, '\\$&');
}
