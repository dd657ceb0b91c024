/**
 * Image references read as the container runtime reads them: the grammar and the normalization of
 * distribution/reference (reference.go, normalize.go), which containerd, CRI-O and the kubelet use.
 * `busybox`, `library/busybox`, `docker.io/library/busybox` and `index.docker.io/library/busybox`
 * all name the repository `docker.io/library/busybox`; a reference with neither tag nor digest means
 * the tag `latest`; a digest may replace a tag or accompany it.
 *
 * Written here rather than taken from npm: the one maintained port (@swimlane/docker-reference 2.0.1)
 * keeps the old separator `[-]*`, which backtracks exponentially (an image of 18 letters and a `!`
 * took 112 s), and every string parsed here comes from a pod. This parser splits the text at its
 * delimiters first and checks each part with an anchored pattern that cannot backtrack badly, on a
 * length bounded before any pattern runs.
 */

/** A parsed, normalized image reference. */
export interface ImageReference {
  /** Registry host and port: `docker.io`, `registry.k8s.io`, `localhost:5000`. */
  readonly domain: string;
  /** Repository path inside the registry: `library/busybox`, `fluent/fluent-bit`. */
  readonly path: string;
  /** `domain/path`: what two references must share to name one repository. */
  readonly repository: string;
  /** The tag; `latest` when the reference has neither tag nor digest, absent when only a digest pins it. */
  readonly tag?: string;
  /** `algorithm:hex`, when the reference pins content. */
  readonly digest?: string;
}

const DEFAULT_DOMAIN = 'docker.io';
const LEGACY_DEFAULT_DOMAIN = 'index.docker.io';
const OFFICIAL_PREFIX = 'library/';
const DEFAULT_TAG = 'latest';
/** NameTotalLengthMax in reference.go. */
const NAME_MAX = 255;
/** Name, a 128-character tag and a sha512 digest fit well inside this; checked before any pattern runs. */
const REFERENCE_MAX = 1024;

// reference.go: path-component := alpha-numeric [separator alpha-numeric]*; separator := [_.] | __ | [-]+
const PATH_COMPONENT = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
const PATH = new RegExp(`^${PATH_COMPONENT}(?:/${PATH_COMPONENT})*$`);
// domain := host [":" port]; host := domain-name | "[" IPv6 "]"
const DOMAIN_COMPONENT = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const DOMAIN = new RegExp(`^(?:${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*|\\[[a-fA-F0-9:]+\\])(?::[0-9]+)?$`);
const TAG = /^[\w][\w.-]{0,127}$/;
const DIGEST = /^[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}$/;
/** A bare image id, which ParseNormalizedNamed refuses as a name. */
const IDENTIFIER = /^[a-f0-9]{64}$/;
/** opencontainers/go-digest: the algorithms a runtime can verify, with their hex lengths. */
const DIGEST_HEX: Readonly<Record<string, number>> = { sha256: 64, sha384: 96, sha512: 128 };

/** The reference parsed and normalized, or why it is not a valid reference. Never throws. */
export function parseImage(text: string): ImageReference | { readonly problem: string } {
  if (text.length === 0) return { problem: 'the reference is empty' };
  if (text.length > REFERENCE_MAX) return { problem: `the reference is longer than ${REFERENCE_MAX} characters` };
  const at = text.indexOf('@');
  const digest = at < 0 ? undefined : text.slice(at + 1);
  const named = at < 0 ? text : text.slice(0, at);
  if (digest !== undefined) {
    const problem = digestProblem(digest);
    if (problem !== undefined) return { problem };
  }
  const slash = named.lastIndexOf('/');
  const colon = named.lastIndexOf(':');
  const tag = colon > slash ? named.slice(colon + 1) : undefined;
  const name = colon > slash ? named.slice(0, colon) : named;
  if (tag !== undefined && !TAG.test(tag)) return { problem: `tag "${tag}" is not valid (letters, digits, _ . -, at most 128, not starting with . or -)` };
  if (IDENTIFIER.test(name)) return { problem: 'a 64-character hexadecimal image id is not a repository name' };
  const { domain, path } = splitDomain(name);
  if (!DOMAIN.test(domain)) return { problem: `registry "${domain}" is not a valid host[:port]` };
  if (path.toLowerCase() !== path) return { problem: `repository name "${path}" must be lowercase` };
  if (!PATH.test(path))
    return { problem: `repository name "${path}" is not valid (lowercase letters, digits and separators . _ __ -, in components separated by /)` };
  const repository = `${domain}/${path}`;
  if (repository.length > NAME_MAX) return { problem: `repository name is longer than ${NAME_MAX} characters` };
  const pinnedTag = tag ?? (digest === undefined ? DEFAULT_TAG : undefined);
  return { domain, path, repository, ...(pinnedTag !== undefined && { tag: pinnedTag }), ...(digest !== undefined && { digest }) };
}

/**
 * The normalized repository of an image reference (`busybox:1.36` -> `docker.io/library/busybox`),
 * or the text itself when it is not a valid reference, so that an invalid image only ever matches
 * the very same text.
 */
export function imageRepository(image: string): string {
  const ref = parseImage(image);
  return 'problem' in ref ? image : ref.repository;
}

/**
 * True when both references name one repository. Another webhook may pin a tag or a digest, or write
 * the long form of a name; it may not swap the repository.
 */
export function sameRepository(a: string, b: string): boolean {
  return a === b || imageRepository(a) === imageRepository(b);
}

// normalize.go splitDockerDomain: the first component is a registry only when it looks like a host
// (a dot or a port, `localhost`, or uppercase letters, which a repository path never has).
function splitDomain(name: string): { domain: string; path: string } {
  const i = name.indexOf('/');
  const first = i < 0 ? '' : name.slice(0, i);
  const isHost = i >= 0 && (first.includes('.') || first.includes(':') || first === 'localhost' || first.toLowerCase() !== first);
  let domain = isHost ? first : DEFAULT_DOMAIN;
  let path = isHost ? name.slice(i + 1) : name;
  if (domain === LEGACY_DEFAULT_DOMAIN) domain = DEFAULT_DOMAIN;
  if (domain === DEFAULT_DOMAIN && !path.includes('/')) path = OFFICIAL_PREFIX + path;
  return { domain, path };
}

function digestProblem(digest: string): string | undefined {
  if (!DIGEST.test(digest)) return `digest "${digest}" is not algorithm:hex`;
  const [algorithm = '', hex = ''] = digest.split(':');
  const length = Object.hasOwn(DIGEST_HEX, algorithm) ? DIGEST_HEX[algorithm] : undefined;
  if (length === undefined) return `digest algorithm "${algorithm}" is not one a runtime verifies (${Object.keys(DIGEST_HEX).join(', ')})`;
  if (hex.length !== length) return `a ${algorithm} digest has ${length} hexadecimal digits, not ${hex.length}`;
  return undefined;
}

/**
 * Registry mirrors the operator declared (`--image-mirror SOURCE=MIRROR`): a policy engine or a
 * pull-through cache that runs after the injector rewrites `SOURCE/...` into `MIRROR/...`
 * (Kyverno's "replace image registry", Gatekeeper's AssignImage, a mirror webhook), and a sidecar so
 * rewritten still runs the template's repository. Both sides are prefixes of a normalized
 * repository, matched on whole components, as CRI-O's registries.conf matches `prefix` and
 * containerd's hosts.toml names a registry host: `docker.io` covers `docker.io/fluent/fluent-bit`,
 * never `docker.iox/...`.
 */
export interface ImageMirror {
  /** The repository prefix the templates name: `docker.io`, `quay.io/prometheus`, `localhost:5000`. */
  readonly source: string;
  /** The prefix a later webhook puts in its place: `mirror.example.com/dockerhub`. */
  readonly mirror: string;
}

/** The flag that sets the mirrors (config's Options takes its name from here, so a refusal can name it). */
export const IMAGE_MIRROR_FLAG = 'image-mirror';

/** The mirrors, prepared once at start; looked at only for a sidecar whose repository is not the template's. */
export interface ImageMirrors {
  readonly entries: readonly ImageMirror[];
}

export const NoImageMirrors: ImageMirrors = Object.freeze({ entries: Object.freeze([]) });

/** More than any registry layout needs; bounds the work per mismatched sidecar. */
export const IMAGE_MIRRORS_MAX = 64;

/**
 * Reads `SOURCE=MIRROR` entries (`docker.io=mirror.example.com/dockerhub`), or says what is wrong
 * with the first bad one. Each side is a registry host (with a dot or a port, or `localhost`, as the
 * runtime tells a registry from a Docker Hub path), optionally followed by path components; no tag
 * or digest. `index.docker.io` is read as `docker.io`. Never throws.
 */
export function parseImageMirrors(entries: readonly string[]): ImageMirrors | { readonly problem: string } {
  if (entries.length > IMAGE_MIRRORS_MAX) return { problem: `${entries.length} mirrors, more than ${IMAGE_MIRRORS_MAX}` };
  const out: ImageMirror[] = [];
  for (const entry of entries) {
    const eq = entry.indexOf('=');
    if (eq < 0) return { problem: `"${entry}" is not SOURCE=MIRROR (e.g. docker.io=mirror.example.com/dockerhub)` };
    const source = repositoryPrefix(entry.slice(0, eq).trim());
    if ('problem' in source) return { problem: `"${entry}": the source ${source.problem}` };
    const mirror = repositoryPrefix(entry.slice(eq + 1).trim());
    if ('problem' in mirror) return { problem: `"${entry}": the mirror ${mirror.problem}` };
    if (source.prefix === mirror.prefix) return { problem: `"${entry}" maps ${source.prefix} to itself` };
    if (!out.some((m) => m.source === source.prefix && m.mirror === mirror.prefix)) out.push(Object.freeze({ source: source.prefix, mirror: mirror.prefix }));
  }
  return Object.freeze({ entries: Object.freeze(out) });
}

/**
 * One `--image-mirror` entry that parseImageMirrors accepts, as a pattern in the syntax ECMAScript
 * and Go's RE2 share: the chart's values.schema.json refuses at render time what the server would
 * refuse at start (Helm checks the schema with Go's regexp). Each side is a registry host
 * with a dot or a port, or localhost, then path components. Left to the server: a side over 255
 * characters, an entry that maps a prefix to itself; refused here though the flag takes them: two
 * entries joined by a comma (the chart gives one flag per entry).
 */
export const MIRROR_ENTRY_PATTERN = (() => {
  const host = `(?:${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})+(?::[0-9]+)?|${DOMAIN_COMPONENT}:[0-9]+|localhost|\\[[a-fA-F0-9:]+\\](?::[0-9]+)?)`;
  // `host/` is the host alone (repositoryPrefix reads an empty path).
  const side = `${host}(?:(?:/${PATH_COMPONENT})+|/)?`;
  return `^[ \\t]*${side}[ \\t]*=[ \\t]*${side}[ \\t]*$`;
})();

/** One side of a mirror entry, normalized: `host[:port]` and optional path components. */
function repositoryPrefix(text: string): { readonly prefix: string } | { readonly problem: string } {
  if (text === '') return { problem: 'is empty' };
  if (text.length > NAME_MAX) return { problem: `is longer than ${NAME_MAX} characters` };
  if (text.includes('@')) return { problem: `"${text}" has a digest; give a registry or repository prefix` };
  const slash = text.indexOf('/');
  const host = slash < 0 ? text : text.slice(0, slash);
  const path = slash < 0 ? '' : text.slice(slash + 1);
  if (path.includes(':')) return { problem: `"${text}" has a tag; give a registry or repository prefix` };
  if (!DOMAIN.test(host)) return { problem: `"${host}" is not a valid registry host[:port]` };
  // splitDockerDomain: without a dot, a port or `localhost`, the runtime reads the first component as a Docker Hub path.
  if (!host.includes('.') && !host.includes(':') && host !== 'localhost')
    return {
      problem: `"${text}" does not begin with a registry host (a name with a dot or a port, or localhost); the runtime would read it as docker.io/${text}`,
    };
  if (path !== '' && !PATH.test(path))
    return { problem: `"${path}" is not a valid repository path (lowercase letters, digits and separators . _ __ -, in components separated by /)` };
  const domain = host === LEGACY_DEFAULT_DOMAIN ? DEFAULT_DOMAIN : host;
  return { prefix: path === '' ? domain : `${domain}/${path}` };
}

/**
 * The mirror entry under which the image `found` runs the repository `wanted` (normalized, as
 * imageRepository gives it), or undefined. Only source to mirror: the mirror prefix of `found` is
 * put back to its source and the result read as the runtime reads a name (`docker.io` +
 * `busybox` is `docker.io/library/busybox`), so a mirror that keeps or drops Docker Hub's
 * `library/` both match. Called only when the repositories differ; no work without mirrors.
 */
export function mirroredFrom(wanted: string, found: string, mirrors: ImageMirrors): ImageMirror | undefined {
  if (mirrors.entries.length === 0) return undefined;
  const ref = parseImage(found);
  if ('problem' in ref) return undefined;
  const repository = ref.repository;
  for (const m of mirrors.entries) {
    if (!underPrefix(repository, m.mirror)) continue;
    if (unmirrored(m.source, repository.slice(m.mirror.length)) === wanted) return m;
  }
  return undefined;
}

/** True when `repository` is `prefix` or lies under it, on a component boundary. */
function underPrefix(repository: string, prefix: string): boolean {
  return repository.startsWith(prefix) && (repository.length === prefix.length || repository.charCodeAt(prefix.length) === SLASH);
}

const SLASH = 0x2f;

/** `source` followed by the rest of a mirrored repository (`''` or `/...`), normalized as splitDomain does. */
function unmirrored(source: string, rest: string): string {
  const joined = source + rest;
  if (!joined.startsWith(`${DEFAULT_DOMAIN}/`)) return joined;
  return joined.indexOf('/', DEFAULT_DOMAIN.length + 1) < 0 ? `${DEFAULT_DOMAIN}/${OFFICIAL_PREFIX}${joined.slice(DEFAULT_DOMAIN.length + 1)}` : joined;
}

/**
 * The `--image-mirror` entry that would admit `found` for the template's image `wanted`, when `found`
 * looks like that image served from another registry (its repository ends with the same name, and
 * it keeps the tag: a mirror policy moves the registry, not the release): said in a denial so that
 * the operator of a cluster whose policy rewrites images knows the flag. Undefined otherwise: a pod
 * that runs its own container of the sidecar's name (Bitnami's fluent-bit chart names its container
 * fluent-bit, at its own tag) is not told about mirrors.
 */
export function suggestedMirror(wanted: string, found: string): string | undefined {
  const ref = parseImage(found);
  const template = parseImage(wanted);
  if ('problem' in ref || 'problem' in template) return undefined;
  if (ref.tag !== undefined && template.tag !== undefined && ref.tag !== template.tag) return undefined;
  const want = template.repository.split('/');
  const have = ref.repository.split('/');
  if (want[0] === have[0]) return undefined;
  let shared = 0;
  while (shared < want.length - 1 && shared < have.length - 1 && want[want.length - 1 - shared] === have[have.length - 1 - shared]) shared++;
  if (shared === 0) return undefined;
  return `${want.slice(0, want.length - shared).join('/')}=${have.slice(0, have.length - shared).join('/')}`;
}
