import { Command, Option } from 'commander';
import { configFromFlags, Options, type Config } from '../config/config.js';

/** One option per row of the config table, so a row added there is a flag of `serve` with no other change. */
export function serveOptions(): Option[] {
  return Object.values(Options).map((o) => {
    const schema: { readonly type?: string; readonly enum?: readonly string[]; readonly default: unknown } = o.schema;
    const value = schema.type === 'integer' ? '<n>' : '<value>';
    // No commander default: the environment variable sits between the flag and the default, and Ajv validates.
    const option = new Option(`--${o.flag} ${value}`, `${o.help} (env ${o.env}, default ${JSON.stringify(schema.default)})`);
    // A flag with a fixed set of values refuses another by listing them, as every flag with choices does.
    if (schema.enum !== undefined) option.choices(schema.enum);
    // A repeatable flag is one comma-separated list, as its environment variable writes it.
    return 'repeatable' in o ? option.argParser((v: string, previous?: string) => (previous === undefined ? v : `${previous},${v}`)) : option;
  });
}

/** The configuration from `serve`'s parsed options (commander's camelCase keys): a flag wins over its variable, which wins over the default. */
export function configFromOptions(values: Readonly<Record<string, string | undefined>>, env: NodeJS.ProcessEnv = process.env): Config {
  return configFromFlags(Object.fromEntries(Object.values(Options).map((o) => [o.flag, values[camel(o.flag)]])), env);
}

/**
 * The configuration `sidecar-injector serve ARGV` would run with, read by the same options
 * (serveOptions) and the same mapping (configFromOptions) as the command, without starting it: for
 * what starts a server in process (the tests) or reads a manifest's container args as serve would
 * (the manifest and chart tests). Throws a CommanderError for an unknown flag, an argument or a value
 * outside a flag's choices, and CONFIG_INVALID naming the flag for an invalid value.
 */
export function serveConfig(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Config {
  const serve = new Command('serve').exitOverride().configureOutput({ writeOut: () => {}, writeErr: () => {} });
  for (const option of serveOptions()) serve.addOption(option);
  serve.parse([...argv], { from: 'user' });
  return configFromOptions(serve.opts(), env);
}

function camel(flag: string): string {
  return flag.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
}
