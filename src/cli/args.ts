import { readFile } from 'node:fs/promises';
import { Options } from '../config/config.js';
import { InjectorError } from '../errors.js';
import { SHIPPED_WEBHOOK_CONFIGURATIONS } from '../generated/shipped-webhooks.js';
import type { KubeClients } from '../kube/client.js';
import type { JsonObject } from '../kube/types.js';
import type { listClusterTemplates } from '../kube/sidecartemplates.js';
import { loadTemplateSet, type TemplateSet } from '../templates/load.js';
import { parseDocuments } from '../workload/workload.js';
import type { Cluster } from './admit.js';
import { templatesDirError } from './errors.js';

/** The flags inject and explain share, as the command line gave them. */
export interface InputOptions {
  /** `-f`: a file, or `-` for standard input. */
  readonly filename: string;
  readonly templatesDir?: string;
  /** `--templates-source cluster`: the cluster's SidecarTemplate objects instead of a directory. */
  readonly templatesSource?: string;
  /** With `--templates-source cluster`: the injector's namespace, whose templates are cluster-wide. */
  readonly templatesNamespace?: string;
  readonly kubeconfig?: string;
  /** `-n`: the namespace of objects that do not name one. */
  readonly namespace: string;
  /** `--namespace-labels`: the labels of the pods' namespace, when given. */
  readonly namespaceLabels?: Readonly<Record<string, string>>;
}

/** What inject and explain work on: the documents of `-f`, the templates, and the cluster they are admitted to. */
export interface Inputs {
  readonly docs: JsonObject[];
  readonly set: TemplateSet;
  /** The shipped webhook configurations, with the namespace labels given (`--namespace-labels`). */
  readonly cluster: Cluster;
}

/** Reads what inject and explain share: the input documents, the template set and the cluster. */
export async function readInputs(
  command: string,
  values: InputOptions,
  stdin: NodeJS.ReadableStream,
  stderr: (text: string) => void = (t) => process.stderr.write(t),
): Promise<Inputs> {
  const cluster = { configurations: SHIPPED_WEBHOOK_CONFIGURATIONS, namespaceLabels: values.namespaceLabels ?? {} };
  const text = await readInput(command, values.filename, stdin);
  const source = values.filename === '-' ? 'standard input' : values.filename;
  const docs = parseDocuments(text, source);
  // An empty input is a mistake (a pipe whose first command failed, a wrong file), never a manifest.
  if (docs.length === 0) throw new InjectorError('INPUT_INVALID', [source, 'it holds no Kubernetes object (it is empty, or only comments)']);
  // The cluster's templates of the namespaces the objects go to: what a team may read there.
  const namespaces = docs.map((doc) => namespaceOf(doc) ?? values.namespace);
  const set =
    values.templatesSource === 'cluster'
      ? await clusterTemplates(values, (line) => stderr(`${line}\n`), undefined, namespaces)
      : await loadTemplates(values.templatesDir);
  return { docs, set, cluster };
}

function namespaceOf(doc: JsonObject): string | undefined {
  const metadata = doc['metadata'];
  const namespace = typeof metadata === 'object' && metadata !== null && !Array.isArray(metadata) ? (metadata as JsonObject)['namespace'] : undefined;
  return typeof namespace === 'string' && namespace !== '' ? namespace : undefined;
}

/** Reads `-f FILE`, or standard input for `-f -`. */
async function readInput(command: string, file: string | undefined, stdin: NodeJS.ReadableStream = process.stdin): Promise<string> {
  if (file === undefined) throw new InjectorError('USAGE', [`${command}: -f FILE is required (use -f - for standard input)`]);
  if (file !== '-') {
    try {
      return await readFile(file, 'utf8');
    } catch (err) {
      const missing = (err as { code?: unknown }).code === 'ENOENT';
      throw new InjectorError('INPUT_INVALID', [file, missing ? 'no such file; check the -f path (or use -f - for standard input)' : (err as Error).message], {
        cause: err,
      });
    }
  }
  const chunks: Buffer[] = [];
  for await (const chunk of stdin) chunks.push(Buffer.from(chunk as Buffer));
  return Buffer.concat(chunks).toString('utf8');
}

/** The templates directory as `serve` resolves it: the flag, else the environment variable, else the default. */
export function templatesDir(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  return flag || env[Options.templatesDir.env] || Options.templatesDir.schema.default;
}

/** The cluster's SidecarTemplates as a server would serve them; an invalid object is named on standard error (a `note:`) and left out, as the server leaves it. */
export async function clusterTemplates(
  values: Pick<InputOptions, 'kubeconfig' | 'templatesNamespace'>,
  warn: (line: string) => void,
  kube?: KubeClients,
  namespaces?: readonly string[],
): Promise<TemplateSet> {
  const { set, invalid } = await listTemplateObjects(values, kube, namespaces);
  for (const i of invalid) warn(`note: sidecartemplate ${i.key} is invalid and not served: ${i.faults.join('; ')}`);
  return set;
}

/**
 * Lists the cluster's SidecarTemplate objects once: the set a server would serve, and the invalid
 * objects it leaves out. Through `kube` when the command has its clients already, else through
 * `--kubeconfig`; the templates of `--templates-namespace` are cluster-wide. With `namespaces`,
 * only those and the cluster-wide ones (namespaced lists: a team's rights, docs/cli.md).
 */
export async function listTemplateObjects(
  values: Pick<InputOptions, 'kubeconfig' | 'templatesNamespace'>,
  kube?: KubeClients,
  namespaces?: readonly string[],
): ReturnType<typeof listClusterTemplates> {
  // Loaded only when the cluster is read: the Kubernetes client costs ~350 ms to import.
  const [{ createKubeClients, apiError }, { listClusterTemplates }] = await Promise.all([import('../kube/client.js'), import('../kube/sidecartemplates.js')]);
  const home = values.templatesNamespace ?? 'sidecar-injector';
  const clients = kube ?? createKubeClients({ kubeconfig: values.kubeconfig ?? '', namespace: home });
  try {
    return await listClusterTemplates(clients, home, namespaces);
  } catch (err) {
    throw apiError('list sidecartemplates.sidecar-injector.io', err);
  }
}

/** Loads the template set the server would load from that directory. */
export async function loadTemplates(flag: string | undefined): Promise<TemplateSet> {
  const dir = templatesDir(flag);
  try {
    return await loadTemplateSet(dir);
  } catch (err) {
    throw templatesDirError(err, dir);
  }
}

/** Where a command writes; tests pass their own. */
export interface IO {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly stdin: NodeJS.ReadableStream;
  /** Columns for help text; absent: a fixed width (golden help files do not depend on a terminal). */
  readonly width?: number;
}

/**
 * Writes to a stream of the process until its reader goes away. When the reader of a pipe exits
 * early (`sidecar-injector lint --help | head -1`), a write fails with EPIPE; like git and kubectl,
 * the CLI then stops writing there and finishes quietly with its own exit status, instead of dying
 * of an unhandled 'error' event. Any other stream error still ends the process.
 */
function pipeWriter(stream: NodeJS.WritableStream): (text: string) => void {
  let open = true;
  let watched = false;
  return (text) => {
    if (!open) return;
    if (!watched) {
      watched = true;
      stream.on('error', (err: NodeJS.ErrnoException) => {
        if (err.code !== 'EPIPE') throw err;
        open = false;
      });
    }
    stream.write(text);
  };
}

/** The process's own streams. */
export const processIO: IO = {
  stdout: pipeWriter(process.stdout),
  stderr: pipeWriter(process.stderr),
  stdin: process.stdin,
  ...(process.stdout.isTTY && { width: process.stdout.columns }),
};
