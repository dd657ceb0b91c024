import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { InjectorError } from '../../src/errors.js';
import { CommanderError } from 'commander';
import { serveConfig } from '../../src/cli/serve-flags.js';
import { imageMirrors, Options } from '../../src/config/config.js';

const refused = (argv: string[], env: NodeJS.ProcessEnv, message: RegExp) =>
  assert.throws(
    () => serveConfig(argv, env),
    (err: unknown) => err instanceof InjectorError && err.code === 'CONFIG_INVALID' && message.test(err.message),
  );

// Through serveConfig: the flags as `sidecar-injector serve` reads them (commander), then configFromFlags.
describe('the configuration serve runs with', () => {
  it('takes each default from the table when neither a flag nor the environment sets it', () => {
    const config = serveConfig([], {});
    for (const [key, o] of Object.entries(Options)) assert.deepEqual(config[key as keyof typeof Options], o.schema.default, key);
  });

  it('takes the environment over the default, and a flag over both', () => {
    assert.equal(serveConfig([], { SIDECAR_INJECTOR_PORT: '9443' }).port, 9443);
    assert.equal(serveConfig(['--port', '10443'], { SIDECAR_INJECTOR_PORT: '9443' }).port, 10443);
    assert.equal(serveConfig(['--log-level=debug'], { SIDECAR_INJECTOR_LOG_LEVEL: 'warn' }).logLevel, 'debug');
    assert.equal(serveConfig([], { SIDECAR_INJECTOR_TEMPLATES_DIR: '/etc/templates' }).templatesDir, '/etc/templates');
  });

  it('treats an empty environment variable as unset', () => {
    assert.equal(serveConfig([], { SIDECAR_INJECTOR_PORT: '' }).port, 8443);
  });

  it('turns numbers into integers, and freezes the result', () => {
    const config = serveConfig(['--max-inflight', '7'], {});
    assert.equal(config.maxInflight, 7);
    assert.ok(Object.isFrozen(config));
  });

  it('refuses an invalid value naming the flag, its variable and the value', () => {
    refused(['--port', '70000'], {}, /^invalid configuration: --port \(SIDECAR_INJECTOR_PORT\) must be <= 65535: 70000$/);
    refused(
      [],
      { SIDECAR_INJECTOR_LOG_LEVEL: 'loud' },
      /--log-level \(SIDECAR_INJECTOR_LOG_LEVEL\) must be one of trace, debug, info, warn, error, fatal, silent: "loud"/,
    );
    refused(['--drain-timeout', 'soon'], {}, /--drain-timeout \(SIDECAR_INJECTOR_DRAIN_TIMEOUT\) must be integer: "soon"/);
  });

  it('takes a revision as a DNS label, empty by default', () => {
    assert.equal(serveConfig([], {}).revision, '');
    assert.equal(serveConfig(['--revision=canary'], {}).revision, 'canary');
    assert.equal(serveConfig([], { SIDECAR_INJECTOR_REVISION: 'b-2' }).revision, 'b-2');
    refused(['--revision', 'Canary'], {}, /--revision \(SIDECAR_INJECTOR_REVISION\) must match pattern/);
  });

  it('names every invalid value at once', () => {
    refused(
      ['--port=-1', '--max-inflight', '0'],
      {},
      /--port \(SIDECAR_INJECTOR_PORT\) must be >= 0: -1; --max-inflight \(SIDECAR_INJECTOR_MAX_INFLIGHT\) must be >= 1: 0/,
    );
  });

  it('refuses an unknown flag and a positional argument, as usage errors of the command', () => {
    const usage = (argv: string[], code: string, message: RegExp) =>
      assert.throws(
        () => serveConfig(argv, {}),
        (err: unknown) => err instanceof CommanderError && err.code === code && message.test(err.message),
      );
    usage(['--prot', '1'], 'commander.unknownOption', /--prot/);
    usage(['serve'], 'commander.excessArguments', /too many arguments/);
  });

  it('takes --image-mirror repeated, or comma-separated in its variable, as one list', () => {
    const entries = (argv: string[], env: NodeJS.ProcessEnv) => imageMirrors(serveConfig(argv, env)).entries.map((m) => `${m.source}=${m.mirror}`);
    assert.deepEqual(entries(['--image-mirror', 'docker.io=mirror.example.com/dockerhub', '--image-mirror=quay.io=mirror.example.com/quay'], {}), [
      'docker.io=mirror.example.com/dockerhub',
      'quay.io=mirror.example.com/quay',
    ]);
    assert.deepEqual(entries([], { SIDECAR_INJECTOR_IMAGE_MIRROR: 'docker.io=mirror.example.com/dockerhub, quay.io=mirror.example.com/quay' }), [
      'docker.io=mirror.example.com/dockerhub',
      'quay.io=mirror.example.com/quay',
    ]);
    assert.deepEqual(
      entries(['--image-mirror', 'ghcr.io=mirror.example.com/ghcr'], { SIDECAR_INJECTOR_IMAGE_MIRROR: 'docker.io=mirror.example.com/dockerhub' }),
      ['ghcr.io=mirror.example.com/ghcr'],
    );
    assert.deepEqual(entries([], {}), []);
  });

  it('refuses an invalid --image-mirror at start, in one line naming the flag and its variable', () => {
    refused(
      ['--image-mirror', 'docker.io'],
      {},
      /^invalid configuration: --image-mirror \(SIDECAR_INJECTOR_IMAGE_MIRROR\): "docker\.io" is not SOURCE=MIRROR \(e\.g\. docker\.io=mirror\.example\.com\/dockerhub\)$/,
    );
    refused(
      [],
      { SIDECAR_INJECTOR_IMAGE_MIRROR: 'docker.io=mirror.example.com,docker.io=mirror' },
      /^invalid configuration: --image-mirror \(SIDECAR_INJECTOR_IMAGE_MIRROR\): "docker\.io=mirror": the mirror "mirror" does not begin with a registry host/,
    );
  });

  it("checks the settings with the generated validator: ajv's compiler never loads with the server", () => {
    // Compiling the schema at start cost every process ~3.5 MB of RSS (npm run schema compiles it once).
    const modules = ['src/cli/program.ts', 'src/main.ts'].map((m) => pathToFileURL(m).href);
    const script = `import { createRequire } from 'node:module';
      for (const m of ${JSON.stringify(modules)}) await import(m);
      const { serveConfig } = await import(${JSON.stringify(pathToFileURL('src/cli/serve-flags.ts').href)});
      serveConfig(['--port', '9443'], {});
      console.log(Object.keys(createRequire(import.meta.url).cache).filter((f) => /[\\/]ajv[\\/]dist[\\/](ajv|core|compile)/.test(f)).join(' '));`;
    const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8' });
    assert.equal(child.status, 0, child.stderr);
    assert.equal(child.stdout.trim(), '', 'loaded at start');
  });
});
