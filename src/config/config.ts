import { parseArgs } from 'node:util';
import { Ajv } from 'ajv';
import { InjectorError } from '../errors.js';

/**
 * Every setting in one table: its flag, its environment variable, its JSON schema (with the
 * default) and a line of help. Flags win over environment variables, which win over defaults; the
 * result is validated and frozen before anything starts (Fastify's initial-config-validation).
 */
export const Options = {
  port: { flag: 'port', env: 'SIDECAR_INJECTOR_PORT', schema: { type: 'integer', minimum: 0, maximum: 65535, default: 8443 }, help: 'HTTPS port for /mutate and /validate' },
  healthPort: { flag: 'health-port', env: 'SIDECAR_INJECTOR_HEALTH_PORT', schema: { type: 'integer', minimum: 0, maximum: 65535, default: 8081 }, help: 'plain-HTTP port for /healthz and /readyz' },
  host: { flag: 'host', env: 'SIDECAR_INJECTOR_HOST', schema: { type: 'string', default: '0.0.0.0' }, help: 'address both servers listen on' },
  certDir: { flag: 'cert-dir', env: 'SIDECAR_INJECTOR_CERT_DIR', schema: { type: 'string', default: '' }, help: 'directory with tls.crt and tls.key (a kubernetes.io/tls Secret); empty: make a self-signed certificate' },
  selfSignedDir: { flag: 'self-signed-dir', env: 'SIDECAR_INJECTOR_SELF_SIGNED_DIR', schema: { type: 'string', default: '.certs' }, help: 'where the self-signed CA is written when --cert-dir is not set' },
  templatesDir: { flag: 'templates-dir', env: 'SIDECAR_INJECTOR_TEMPLATES_DIR', schema: { type: 'string', minLength: 1, default: './templates' }, help: 'directory of SidecarTemplate YAML files' },
  logLevel: { flag: 'log-level', env: 'SIDECAR_INJECTOR_LOG_LEVEL', schema: { enum: ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'], default: 'info' }, help: 'pino log level' },
} as const;

type Schema = (typeof Options)[keyof typeof Options]['schema'];
type ValueOf<S extends Schema> = S extends { type: 'integer' } ? number : S extends { enum: readonly (infer E)[] } ? E : string;

/** The validated, frozen configuration. */
export type Config = { readonly [K in keyof typeof Options]: ValueOf<(typeof Options)[K]['schema']> };

const ajv = new Ajv({ useDefaults: true, coerceTypes: true, allErrors: true });
const validateConfig = ajv.compile({
  type: 'object',
  additionalProperties: false,
  properties: Object.fromEntries(Object.entries(Options).map(([k, o]) => [k, o.schema])),
});

/** Builds the configuration from command-line flags and the environment. Throws CONFIG_INVALID naming the flag. */
export function loadConfig(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = parseFlags(argv);
  const raw: Record<string, unknown> = {};
  for (const [key, o] of Object.entries(Options)) {
    const value = parsed[o.flag] ?? env[o.env];
    if (value !== undefined && value !== '') raw[key] = value;
  }
  if (!validateConfig(raw)) {
    const details = (validateConfig.errors ?? []).map((e) => {
      const key = e.instancePath.slice(1) as keyof typeof Options;
      const o = Options[key];
      return o ? `--${o.flag} (${o.env}) ${e.message ?? 'is invalid'}: ${JSON.stringify(raw[key])}` : (e.message ?? 'invalid');
    });
    throw new InjectorError('CONFIG_INVALID', [details.join('; ')]);
  }
  return Object.freeze(raw) as Config;
}

function parseFlags(argv: readonly string[]): Record<string, string | undefined> {
  const options = Object.fromEntries(Object.values(Options).map((o) => [o.flag, { type: 'string' as const }]));
  try {
    return parseArgs({ args: [...argv], options, strict: true, allowPositionals: false }).values as Record<string, string | undefined>;
  } catch (err) {
    throw new InjectorError('CONFIG_INVALID', [(err as Error).message], { cause: err });
  }
}

/** The flag reference printed by `--help`. */
export function optionsHelp(): string {
  return Object.values(Options)
    .map((o) => `  --${o.flag.padEnd(18)} ${o.help} (env ${o.env}, default ${JSON.stringify(o.schema.default)})`)
    .join('\n');
}
