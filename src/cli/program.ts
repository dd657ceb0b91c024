import { Argument, Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { Options } from '../config/config.js';
import { bashCompletion } from './completion.js';
import { describeError } from './errors.js';
import { processIO, type IO } from './args.js';
import { configFromOptions, serveOptions } from './serve-flags.js';
import { versionLine } from './version.js';

/** The program's name, as installed by package.json `bin`. */
const PROGRAM = 'sidecar-injector';

/** Exit status for a command line that cannot run as written (unknown command or flag, missing value): 2, as git and kubectl use. */
const USAGE_EXIT = 2;

// Each command loads its own modules when it runs: `drift` alone loads the Kubernetes client (~350 ms
// and ~60 MB to import), `serve` alone the server, and `--help` loads none of them.
const Commands = {
  serve: () => import('./serve.js'),
  inject: () => import('./inject.js'),
  explain: () => import('./explain.js'),
  lint: () => import('./lint.js'),
  drift: () => import('./drift.js'),
  policies: () => import('./policies.js'),
  version: () => import('./version.js'),
} as const;

/** Runs one command line (without `node` and the script) and resolves to the process exit status; never throws. */
export async function runCli(argv: readonly string[], io: IO = processIO): Promise<number> {
  let code = 0;
  const program = createProgram(io, (c) => {
    code = c;
  });
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return code;
  } catch (err) {
    if (err instanceof CommanderError) return commanderExit(err);
    io.stderr(`${PROGRAM}: ${describeError(err)}\n`);
    return usageError(err) ? USAGE_EXIT : 1;
  }
}

// A help request ends through the same exception as a mistake; only a mistake is an error.
function commanderExit(err: CommanderError): number {
  return err.exitCode === 0 ? 0 : USAGE_EXIT;
}

function usageError(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === 'USAGE';
}

/**
 * The command tree: each command declares its own flags, help and examples, and hands its action the
 * parsed values as one options object (the command functions stay testable with an injected IO).
 * `done` receives the action's exit status.
 */
function createProgram(io: IO, done: (code: number) => void): Command {
  const program = new Command(PROGRAM)
    .description(
      'Injects sidecar containers into pods from SidecarTemplate files, as a Kubernetes admission webhook, and explains, lints and checks what it injects.',
    )
    .usage('<command> [options]')
    .helpOption('-h, --help', 'show help for a command')
    .version(versionLine(), '-V, --version', 'print the version and exit')
    .helpCommand('help [command]', 'show help for a command')
    .addHelpText('after', `\nRun '${PROGRAM} <command> --help' for a command's flags and examples.\n`)
    .showSuggestionAfterError(true)
    .exitOverride();
  configure(program, io, PROGRAM);
  const command = (name: string, summary: string): Command => {
    const sub = program.command(name).summary(summary).helpOption('-h, --help', 'show this help').exitOverride();
    configure(sub, io, `${PROGRAM} ${name}`);
    return sub;
  };
  const act =
    (run: (...args: unknown[]) => Promise<number>) =>
    async (...args: unknown[]) =>
      done(await run(...args));

  const serve = command('serve', 'run the admission webhook server')
    .description(
      'Runs the admission webhook: /mutate and /validate over HTTPS, /healthz, /readyz and /metrics over HTTP. With --mode policy it serves no webhook and needs no certificate: it keeps the templates compiled to MutatingAdmissionPolicies and a ValidatingAdmissionPolicy in the cluster (server-side apply, the ones no template makes any more deleted; RBAC: get, list, create, patch, delete on the four policy kinds) and serves only the health port, ready after the first sync; --mode hybrid does both, the webhook injecting the templates that do not compile. Every flag can also be set by its environment variable; a flag wins over the variable, which wins over the default.',
    )
    .addHelpText(
      'after',
      examples([
        `${PROGRAM} serve --templates-dir ./templates`,
        `${PROGRAM} serve --cert-dir /etc/webhook/certs --port 8443 --log-level debug`,
        `SIDECAR_INJECTOR_PORT=9443 ${PROGRAM} serve --templates-dir ./templates`,
        `${PROGRAM} serve --mode policy --templates-dir /etc/sidecar-injector/templates --health-port 8081`,
      ]),
    );
  for (const option of serveOptions()) serve.addOption(option);
  serve.action(
    act(async (...args) => {
      const flags = (args[0] ?? {}) as Readonly<Record<string, string | undefined>>;
      const config = configFromOptions(flags);
      return (await Commands.serve()).serveCommand(config);
    }),
  );

  command('inject', 'print manifests with the sidecars injected, or the patch')
    .description(
      'Prints the manifests of FILE (a Pod, a workload with a pod template, a List, several YAML documents) with the sidecars injected exactly as admission would inject them, or with --patch the JSON patch /mutate would answer. Exit status 1 when a pod would be denied.',
    )
    .addOption(filenameOption())
    .addOption(templatesDirOption())
    .addOption(namespaceOption())
    .addOption(new Option('-o, --output <format>', 'output format').choices(['yaml', 'json']).default('yaml'))
    .addOption(new Option('--patch', 'print the JSON patch instead of the injected manifests'))
    .addOption(templatesSourceOption())
    .addOption(templatesNamespaceOption())
    .addOption(templatesKubeconfigOption())
    .addOption(namespaceLabelsOption())
    .addHelpText(
      'after',
      examples([
        `${PROGRAM} inject -f deployment.yaml | kubectl apply -f -`,
        `kubectl get pod web-0 -o yaml | ${PROGRAM} inject -f - --patch`,
        `${PROGRAM} inject -f app.yaml -n team-a --templates-dir ./templates -o json`,
      ]),
    )
    .action(act(async (...args) => (await Commands.inject()).injectCommand(optionsOf(args, 0, { patch: false }), io)));

  command('explain', 'say for each pod whether it would be injected, with what, and why')
    .description('Says for each pod in FILE whether it would be injected, with which templates, where each sidecar goes, and why (or why not).')
    .addOption(filenameOption())
    .addOption(templatesDirOption())
    .addOption(namespaceOption())
    .addOption(new Option('-o, --output <format>', 'output format').choices(['text', 'json']).default('text'))
    .addOption(namespaceLabelsOption())
    .addOption(templatesSourceOption())
    .addOption(templatesNamespaceOption())
    .addOption(templatesKubeconfigOption())
    .addHelpText(
      'after',
      examples([
        `${PROGRAM} explain -f deployment.yaml`,
        `kubectl get deploy web -o yaml | ${PROGRAM} explain -f - --namespace-labels sidecar-injector.io/inject=true`,
        `${PROGRAM} explain -f app.yaml -o json`,
      ]),
    )
    .action(act(async (...args) => (await Commands.explain()).explainCommand(optionsOf(args), io)));

  command('lint', 'check every template in a directory or the cluster; exit 1 on errors (and warnings with --strict)')
    .description(
      "Checks every SidecarTemplate in DIR: load faults as file:line:column, each template injected into sample pods (valid pod, Pod Security level, conflicts between templates). With --templates-source cluster, the cluster's SidecarTemplate objects instead: invalid objects as errors, and the templates each namespace sees checked on the sample pods. Exit status 1 when there is any fault, for pre-commit hooks and CI.",
    )
    .argument('[dir]', `templates directory (default: $${Options.templatesDir.env}, else ${Options.templatesDir.schema.default})`)
    .addOption(new Option('-o, --output <format>', 'output format').choices(['text', 'json']).default('text'))
    .addOption(
      new Option('--pod-security <level>', 'Pod Security Standard the injected pods must meet (none: the same as privileged)')
        .choices(['privileged', 'baseline', 'restricted', 'none'])
        .default('privileged'),
    )
    .addOption(new Option('--strict', 'exit 1 on warnings too, not only on errors'))
    .addOption(new Option('--policies', 'also say per template whether it compiles to an admission policy (the policies command), and why not'))
    .addOption(templatesSourceOption('DIR'))
    .addOption(templatesNamespaceOption())
    .addOption(templatesKubeconfigOption())
    .addOption(
      new Option(
        '-n, --namespace <namespace>',
        "with --templates-source cluster: lint what this namespace's pods see, its own templates over the cluster-wide ones (default: every namespace that has templates)",
      ).conflicts('allNamespaces'),
    )
    .addOption(new Option('-A, --all-namespaces', 'with --templates-source cluster: every namespace that has templates (the default)'))
    .addHelpText(
      'after',
      examples([
        `${PROGRAM} lint ./templates`,
        `${PROGRAM} lint ./templates --pod-security restricted --strict`,
        `${PROGRAM} lint -o json`,
        `${PROGRAM} lint --templates-source cluster -n team-a`,
      ]),
    )
    .action(
      act(async (...args) =>
        (await Commands.lint()).lintCommand(
          { ...optionsOf(args, 1, { strict: false, allNamespaces: false }), ...(args[0] !== undefined && { dir: args[0] as string }) },
          io,
        ),
      ),
    );

  command('policies', 'print the templates as MutatingAdmissionPolicies and a ValidatingAdmissionPolicy (Kubernetes 1.36)')
    .description(
      "Compiles the SidecarTemplates of DIR to admission policies the apiserver runs itself (admissionregistration.k8s.io/v1, Kubernetes 1.36; 1.34 with the beta API and --api-version v1beta1): per template a MutatingAdmissionPolicy with its bindings, and a ValidatingAdmissionPolicy that refuses an opted-in pod without its sidecars. With --templates-source cluster, the cluster's SidecarTemplate objects: the cluster-wide templates bound to every namespace without templates of its own, and each namespace's view (its templates over the cluster-wide ones) bound to that namespace. A template that does not compile (a per-pod image override) is named on standard error with the reason, and the exit status is 1: the webhook must inject it. Before writing, each policy is checked with the apiserver's own CEL (tools/celcost, --verify): a policy the apiserver would refuse, or that goes over its CEL cost limits on a sample pod, is named with the expression and the error, nothing is written, and the exit status is 1.",
    )
    .argument('[dir]', `templates directory (default: $${Options.templatesDir.env}, else ${Options.templatesDir.schema.default})`)
    .addOption(new Option('-o, --output <format>', 'output format').choices(['yaml', 'json']).default('yaml'))
    .addOption(templatesSourceOption('DIR'))
    .addOption(
      new Option(
        '--templates-namespace <namespace>',
        "the injector's namespace: never injected, and with --templates-source cluster the one whose templates are cluster-wide",
      ).default('sidecar-injector'),
    )
    .addOption(templatesKubeconfigOption())
    .addOption(
      new Option(
        '-n, --namespace <namespace>',
        "with --templates-source cluster: only the policies of this namespace's own templates over the cluster-wide ones, bound to it (default: every namespace's)",
      ),
    )
    .addOption(
      new Option(
        '--revision <name>',
        'the policies of this revision (sidecar-injector.io/rev): names sidecar-injector.rev.<name>.<template>, for pods and namespaces labelled with it',
      ),
    )
    .addOption(
      new Option('--api-version <version>', "the MutatingAdmissionPolicies' API version (v1beta1: Kubernetes 1.34 and 1.35 with the beta API on)")
        .choices(['v1', 'v1beta1'])
        .default('v1'),
    )
    .addOption(
      new Option(
        '--verify <when>',
        "check every policy with the apiserver's CEL (tools/celcost) before writing: auto when it is built, always (fail without it), never",
      )
        .choices(['auto', 'always', 'never'])
        .default('auto'),
    )
    .addHelpText(
      'after',
      examples([
        `${PROGRAM} policies ./templates | kubectl apply -f -`,
        `${PROGRAM} policies ./templates -o json --templates-namespace platform`,
        `${PROGRAM} policies --templates-source cluster --api-version v1beta1`,
        `${PROGRAM} policies ./templates-canary --revision canary`,
      ]),
    )
    .action(
      act(async (...args) =>
        (await Commands.policies()).policiesCommand({ ...optionsOf(args, 1), ...(args[0] !== undefined && { dir: args[0] as string }) }, io),
      ),
    );

  command('drift', 'list running pods whose sidecars are out of date or missing; --restart rolls them')
    .description(
      'Lists the running pods whose injected sidecars are out of date with the current templates (the recorded status differs from what the templates render for the pod now, or a template it used is gone), and the opted-in pods that run without sidecars, grouped by owning workload with the command that rolls each, and counted per namespace. With --templates-source cluster, each pod is judged against the SidecarTemplate objects its namespace sees. With --restart, rolls those Deployments, StatefulSets and DaemonSets one at a time as kubectl rollout restart does. Reads pods through the Kubernetes API with the usual kubeconfig rules.',
    )
    .addOption(templatesDirOption().conflicts('templatesConfigmap'))
    .addOption(
      new Option('--templates-configmap <namespace/name>', 'the installed templates ConfigMap, read through the API unless --templates-dir is given').default(
        'sidecar-injector/sidecar-injector-templates',
      ),
    )
    .addOption(templatesSourceOption('--templates-dir, else --templates-configmap').conflicts(['templatesDir', 'templatesConfigmap']))
    .addOption(templatesNamespaceOption())
    .addOption(new Option('-n, --namespace <namespace>', "namespace to look in (default: the kubeconfig context's namespace)").conflicts('allNamespaces'))
    .addOption(new Option('-A, --all-namespaces', 'look in every namespace'))
    .addOption(
      new Option(
        '--revision <name>',
        'judge the pods injected by the install of this revision (sidecar-injector.io/rev), against its webhooks and templates (the ConfigMap <configmap>-<name> unless --templates-configmap is given)',
      ),
    )
    .addOption(new Option('--all', 'list every injected pod, not only the stale ones'))
    .addOption(new Option('-o, --output <format>', 'output format').choices(['text', 'json']).default('text'))
    .addOption(new Option('--kubeconfig <file>', 'kubeconfig file (default: $KUBECONFIG, else ~/.kube/config; in a pod, its ServiceAccount)'))
    .addOption(new Option('--restart', 'roll the Deployments, StatefulSets and DaemonSets of stale and missing pods, one at a time'))
    .addOption(new Option('--dry-run', 'with --restart: print the plan only'))
    .addOption(new Option('--timeout <duration>', 'with --restart: how long one rollout may take before the run stops').default('5m'))
    .addOption(new Option('--max-workloads <n>', 'with --restart: roll at most this many workloads').default('10'))
    .addOption(new Option('--poll-interval <duration>', "how often a rollout's status is read").default('2s').hideHelp())
    .addHelpText(
      'after',
      examples([
        `${PROGRAM} drift -A`,
        `${PROGRAM} drift -n team-a --all -o json`,
        `${PROGRAM} drift -A --templates-source cluster`,
        `${PROGRAM} drift -A --templates-dir ./templates   # before applying a template change`,
        `${PROGRAM} drift -n team-a --restart --dry-run`,
      ]),
    )
    .action(
      act(async (...args) =>
        (await Commands.drift()).driftCommand(optionsOf(args, 0, { all: false, allNamespaces: false, restart: false, dryRun: false }), io),
      ),
    );

  command('version', 'print the version, the git commit it was built from, and the Node.js version')
    .description('Prints the version, the git commit it was built from (when known) and the Node.js version.')
    .addOption(new Option('-o, --output <format>', 'output format').choices(['text', 'json']).default('text'))
    .addHelpText('after', examples([`${PROGRAM} version`, `${PROGRAM} version -o json`]))
    .action(act(async (...args) => (await Commands.version()).versionCommand(optionsOf(args), io)));

  command('completion', 'print a shell completion script')
    .description(
      'Prints a bash completion script for the commands, their flags and the values of flags with choices. zsh can load it after `autoload -U bashcompinit && bashcompinit`.',
    )
    .addArgument(new Argument('<shell>', 'the shell').choices(['bash']))
    .addHelpText(
      'after',
      examples([`${PROGRAM} completion bash > ~/.local/share/bash-completion/completions/${PROGRAM}`, `source <(${PROGRAM} completion bash)`]),
    )
    .action(
      act(async () => {
        io.stdout(bashCompletion(program));
        return 0;
      }),
    );

  return program;
}

// Commander hands an action its arguments, then the options object, then the command. Switches get
// their `false` here rather than as commander defaults, which help would print as "(default: false)".
function optionsOf<T>(args: readonly unknown[], at = 0, switches: Readonly<Record<string, false>> = {}): T {
  return { ...switches, ...withoutUndefined(args[at] as Record<string, unknown>) } as T;
}

// exactOptionalPropertyTypes: an option not given is absent, never `undefined`.
function withoutUndefined(values: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(values).filter(([, v]) => v !== undefined));
}

// Help and errors go through the injected IO; the help width is fixed unless a terminal says otherwise,
// so golden help files do not depend on the terminal the tests ran in.
function configure(command: Command, io: IO, prefix: string): void {
  command.configureOutput({
    writeOut: io.stdout,
    writeErr: io.stderr,
    getOutHelpWidth: () => io.width ?? 100,
    getErrHelpWidth: () => io.width ?? 100,
    getOutHasColors: () => false,
    getErrHasColors: () => false,
    outputError: (text, write) => write(`${oneLine(prefix, text)}\n`),
  });
}

/** Commander's `error: unknown option '--x'\n(Did you mean --y?)` as one line that says where to look. */
function oneLine(prefix: string, text: string): string {
  const message = text
    .trim()
    .replace(/^error: /, '')
    .replace(/\s*\n\(Did you mean (.*)\?\)$/, ' (did you mean $1?)')
    .replace(/\s*\n\s*/g, ' ')
    .replace(/\.$/, '');
  return `${prefix}: ${message}; see '${prefix} --help'`;
}

function examples(lines: readonly string[]): string {
  return `\nExamples:\n${lines.map((l) => `  $ ${l}`).join('\n')}\n`;
}

function filenameOption(): Option {
  return new Option('-f, --filename <file>', 'manifest file to read; - reads standard input').makeOptionMandatory();
}

/** --templates-source cluster: the cluster's SidecarTemplate objects, as the pods' namespace sees them; `files` says where `dir` reads. */
function templatesSourceOption(files = '--templates-dir'): Option {
  return new Option(
    '--templates-source <source>',
    `dir: ${files}; cluster: the SidecarTemplate objects of the cluster, those of the pod's namespace over the cluster-wide ones`,
  )
    .choices(['dir', 'cluster'])
    .default('dir');
}

function templatesNamespaceOption(): Option {
  return new Option('--templates-namespace <namespace>', "with --templates-source cluster: the injector's namespace, whose templates are cluster-wide").default(
    'sidecar-injector',
  );
}

function templatesKubeconfigOption(): Option {
  return new Option('--kubeconfig <file>', 'with --templates-source cluster: kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)');
}

function templatesDirOption(): Option {
  return new Option(
    '--templates-dir <dir>',
    `directory of SidecarTemplate YAML files (default: $${Options.templatesDir.env}, else ${Options.templatesDir.schema.default})`,
  );
}

function namespaceOption(): Option {
  return new Option('-n, --namespace <namespace>', 'namespace of objects that do not name one').default('default');
}

function namespaceLabelsOption(): Option {
  return new Option(
    '--namespace-labels <key=value,...>',
    "labels of the pods' namespace, for the namespace opt-in (sidecar-injector.io/inject=true)",
  ).argParser(parseLabels);
}

/** `k=v,k2=v2` as a label map; a pair without `=` or with an empty key is a usage error. */
export function parseLabels(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const pair of text.split(',').filter((p) => p.trim() !== '')) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new InvalidArgumentError(`Expected key=value pairs separated by commas, got "${pair}"`);
    labels[pair.slice(0, eq).trim()] = pair.slice(eq + 1).trim();
  }
  return labels;
}
