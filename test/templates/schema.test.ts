import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import { describe, it } from 'node:test';
import { TemplateSetError, type TemplateFault } from '../../src/errors.js';
import { compileTemplateSet, loadTemplateSet } from '../../src/templates/load.js';
import { coreDefinitions } from '../../src/templates/schema.js';

const HEAD = 'apiVersion: sidecar-injector.io/v1alpha1\nkind: SidecarTemplate\nmetadata:\n  name: t\nspec:\n';

/** A template whose spec is `body` (indented by two spaces already). Line 6 is the first line of the body. */
function load(body: string) {
  return compileTemplateSet([{ file: 't.yaml', text: HEAD + body }], 'test');
}

function faults(body: string): TemplateFault[] {
  try {
    load(body);
  } catch (err) {
    assert.ok(err instanceof TemplateSetError, String(err));
    return [...err.faults];
  }
  assert.fail(`expected the template to be refused:\n${body}`);
}

const container = (extra: string): string => `  containers:\n    - name: agent\n      image: registry.example.com/agent:1\n${extra}`;

/** Shapes Kubernetes accepts, each taken from a real chart or the core/v1 API, that must load. */
const ACCEPTED: readonly [string, string][] = [
  ['a volume with only a name (defaulted to emptyDir)', '  volumes:\n    - name: scratch\n'],
  ['emptyDir: with no value (null, defaulted to emptyDir)', '  volumes:\n    - name: scratch\n      emptyDir:\n'],
  ['an in-memory emptyDir with a size limit', '  volumes:\n    - name: envoy\n      emptyDir: { medium: Memory, sizeLimit: 64Mi }\n'],
  ['a secret with a YAML 1.1 octal defaultMode', '  volumes:\n    - name: key\n      secret: { secretName: tls, defaultMode: 0400, optional: true }\n'],
  ['a configMap with items and a chart-style 0775 mode', '  volumes:\n    - name: scripts\n      configMap: { name: scripts, defaultMode: 0775, items: [{ key: run.sh, path: run.sh, mode: 0755 }] }\n'],
  ['a projected token, configMap and downwardAPI', '  volumes:\n    - name: token\n      projected:\n        defaultMode: 0420\n        sources:\n          - serviceAccountToken: { path: token, expirationSeconds: 3600, audience: vault }\n          - configMap: { name: ca, items: [{ key: ca.crt, path: ca.crt }] }\n          - downwardAPI: { items: [{ path: labels, fieldRef: { fieldPath: metadata.labels } }] }\n'],
  ['probes by port name and number, gRPC, exec', container('      ports: [{ name: http-envoy-prom, containerPort: 15090 }, { name: admin, containerPort: 9901, protocol: TCP }]\n      livenessProbe: { httpGet: { path: /ready, port: admin, scheme: HTTP, httpHeaders: [{ name: X-Probe, value: "1" }] } }\n      readinessProbe: { tcpSocket: { port: 9901 } }\n      startupProbe: { grpc: { port: 9901 }, failureThreshold: 30 }\n')],
  ['lifecycle hooks: exec, sleep, httpGet', container('      lifecycle:\n        postStart: { exec: { command: [/bin/sh, -c, "sleep 1"] } }\n        preStop: { sleep: { seconds: 5 } }\n')],
  ['a full securityContext', container('      securityContext:\n        runAsUser: 1337\n        runAsGroup: 1337\n        runAsNonRoot: true\n        readOnlyRootFilesystem: true\n        allowPrivilegeEscalation: false\n        capabilities: { drop: [ALL], add: [NET_BIND_SERVICE] }\n        seccompProfile: { type: RuntimeDefault }\n')],
  ['env from fields, resources, secrets and configMaps', container('      env:\n        - { name: POD_IP, valueFrom: { fieldRef: { fieldPath: status.podIP } } }\n        - { name: MEM, valueFrom: { resourceFieldRef: { resource: limits.memory, divisor: 1Mi } } }\n        - { name: TOKEN, valueFrom: { secretKeyRef: { name: s, key: token, optional: true } } }\n      envFrom: [{ configMapRef: { name: settings }, prefix: APP_ }]\n')],
  ['resources written as numbers and strings', container('      resources: { limits: { cpu: 1, memory: 1Gi }, requests: { cpu: 100m, memory: "128Mi", ephemeral-storage: 1G } }\n')],
  ['fields the API leaves null', container('      command:\n      workingDir:\n      securityContext:\n')],
  ['serviceAccountToken: true', container('  serviceAccountToken: true\n')],
  ['a projected token of the template\'s own', container('  serviceAccountToken: { audience: vault, expirationSeconds: 600, path: vault/token }\n')],
  ['appContainers naming containers to include and exclude', '  env: [{ name: A, value: "1" }]\n  appContainers: { include: [app, worker], exclude: [metrics-exporter] }\n'],
];

/** Faults Kubernetes (or kubectl) would refuse, with where they must be reported and what must be said. */
const REFUSED: readonly { name: string; body: string; path: string; line: number; message: RegExp }[] = [
  { name: 'a misspelled probe field', body: container('      readinessProbe:\n        httpGet: { path: /ready, prot: 9901 }\n'), path: '/spec/containers/0/readinessProbe/httpGet/prot', line: 10, message: /^unknown field "prot" \(did you mean "port"\?\)$/ },
  { name: 'a pod-level field in a container securityContext (Istio writes fsGroup there)', body: container('      securityContext:\n        runAsUser: 1337\n        fsGroup: 1337\n'), path: '/spec/containers/0/securityContext/fsGroup', line: 11, message: /^unknown field "fsGroup" \(known fields: .*runAsUser/ },
  { name: 'an unknown field deep in a projected volume', body: '  volumes:\n    - name: token\n      projected:\n        sources:\n          - serviceAccountToken: { path: token, audiences: [vault] }\n', path: '/spec/volumes/0/projected/sources/0/serviceAccountToken/audiences', line: 10, message: /unknown field "audiences" \(did you mean "audience"\?\)/ },
  { name: 'an unknown field in lifecycle', body: container('      lifecycle:\n        preStop: { exec: { commands: [x] } }\n'), path: '/spec/containers/0/lifecycle/preStop/exec/commands', line: 10, message: /unknown field "commands" \(did you mean "command"\?\)/ },
  { name: 'a decimal 775 mode (01407), as a chart written for YAML 1.2 gives', body: '  volumes:\n    - name: s\n      configMap: { name: s, defaultMode: 775 }\n', path: '/spec/volumes/0/configMap/defaultMode', line: 8, message: /^must be a file mode between 0 and 0777 \(octal\), got 775 \(01407 in octal\); write it in octal with a leading 0 \(0775\)$/ },
  { name: 'an item mode above 0777', body: '  volumes:\n    - name: s\n      secret: { secretName: s, items: [{ key: k, path: p, mode: 01000 }] }\n', path: '/spec/volumes/0/secret/items/0/mode', line: 8, message: /file mode between 0 and 0777/ },
  { name: 'a container port out of range', body: container('      ports: [{ containerPort: 70000 }]\n'), path: '/spec/containers/0/ports/0/containerPort', line: 9, message: /^must be a port number between 1 and 65535, got 70000$/ },
  { name: 'a probe port of 0', body: container('      readinessProbe: { tcpSocket: { port: 0 } }\n'), path: '/spec/containers/0/readinessProbe/tcpSocket/port', line: 9, message: /port number between 1 and 65535, got 0/ },
  { name: 'a port name longer than 15 characters', body: container('      ports: [{ name: http-envoy-prometheus, containerPort: 15090 }]\n'), path: '/spec/containers/0/ports/0/name', line: 9, message: /must be a port name \(IANA_SVC_NAME\)/ },
  { name: 'a probe port name with an underscore', body: container('      livenessProbe: { httpGet: { port: http_admin } }\n'), path: '/spec/containers/0/livenessProbe/httpGet/port', line: 9, message: /must be a port name/ },
  { name: 'a container name that is not a DNS-1123 label', body: '  containers:\n    - name: Agent_1\n      image: x:1\n', path: '/spec/containers/0/name', line: 7, message: /must be a DNS-1123 label/ },
  { name: 'a volume name that is not a DNS-1123 label', body: '  volumes:\n    - name: my.volume\n', path: '/spec/volumes/0/name', line: 7, message: /must be a DNS-1123 label/ },
  { name: 'a quantity Kubernetes cannot parse', body: container('      resources: { limits: { memory: 1GB } }\n'), path: '/spec/containers/0/resources/limits/memory', line: 9, message: /must be a non-negative quantity such as 100m, 0.5, 128Mi or 1Gi, got "1GB"/ },
  { name: 'a negative quantity', body: container('      resources: { requests: { cpu: -1 } }\n'), path: '/spec/containers/0/resources/requests/cpu', line: 9, message: /non-negative quantity/ },
  { name: 'an enum value Kubernetes does not know', body: container('      imagePullPolicy: Sometimes\n'), path: '/spec/containers/0/imagePullPolicy', line: 9, message: /^must be one of "Always", "IfNotPresent", "Never", got "Sometimes"$/ },
  { name: 'a probe without its required port', body: container('      readinessProbe: { httpGet: { path: /ready } }\n'), path: '/spec/containers/0/readinessProbe/httpGet', line: 9, message: /^missing required field "port"$/ },
  { name: 'a container without an image', body: '  containers:\n    - name: agent\n', path: '/spec/containers/0', line: 7, message: /missing required field "image"/ },
  { name: 'an unquoted YAML 1.1 boolean where a string belongs', body: container('      args: [--appendonly, no]\n'), path: '/spec/containers/0/args/1', line: 9, message: /^must be a string, got false: YAML 1\.1 \(kubectl\) reads it unquoted as a boolean or number, so quote it$/ },
  { name: 'a volume with two sources', body: '  volumes:\n    - name: v\n      emptyDir: {}\n      configMap: { name: c }\n', path: '/spec/volumes/0/configMap', line: 9, message: /^volume "v" has 2 sources \(emptyDir, configMap\); a volume takes exactly one$/ },
  { name: 'a token that expires in less than 10 minutes (the apiserver\'s minimum)', body: '  serviceAccountToken: { audience: vault, expirationSeconds: 599 }\n', path: '/spec/serviceAccountToken/expirationSeconds', line: 6, message: /^must be between 600 \(10 minutes, the apiserver's minimum\) and 4294967296, got 599$/ },
  { name: 'a token path that climbs out of the volume', body: '  serviceAccountToken: { path: ../token }\n', path: '/spec/serviceAccountToken/path', line: 6, message: /^must be a relative path without "\.\.", got "\.\.\/token"$/ },
  { name: 'an absolute token path', body: '  serviceAccountToken: { path: /token }\n', path: '/spec/serviceAccountToken/path', line: 6, message: /^must be a relative path without "\.\.", got "\/token"$/ },
  { name: 'a misspelled field of the token', body: '  serviceAccountToken: { audiences: [vault] }\n', path: '/spec/serviceAccountToken/audiences', line: 6, message: /unknown field "audiences" \(did you mean "audience"\?\)/ },
  { name: 'an appContainers name that is not a DNS-1123 label', body: '  appContainers: { exclude: [Istio_Proxy] }\n', path: '/spec/appContainers/exclude/0', line: 6, message: /must be a DNS-1123 label/ },
];

describe('template schema from the core/v1 definitions', () => {
  it('loads the istio-proxy sidecar as Istio\'s chart renders it', async () => {
    const set = await loadTemplateSet('test/fixtures/yaml/templates');
    const t = set.templates.get('istio-proxy')!;
    assert.equal(t.spec.containers[0]!.name, 'istio-proxy');
    assert.deepEqual(t.spec.volumes.map((v) => v.name).slice(0, 3), ['workload-socket', 'credential-socket', 'workload-certs']);
  });

  for (const [name, body] of ACCEPTED) {
    it(`loads ${name}`, () => {
      assert.doesNotThrow(() => load(body), (err: unknown) => (err instanceof TemplateSetError ? err.message : String(err)));
    });
  }

  it('reads modes with kubectl\'s meaning: 0400 is 256, 0775 is 509', () => {
    const set = load('  volumes:\n    - name: a\n      secret: { secretName: s, defaultMode: 0400 }\n    - name: b\n      configMap: { name: c, defaultMode: 0775 }\n');
    const [a, b] = set.templates.get('t')!.spec.volumes as unknown as { secret?: { defaultMode: number }; configMap?: { defaultMode: number } }[];
    assert.equal(a!.secret!.defaultMode, 256);
    assert.equal(b!.configMap!.defaultMode, 509);
  });

  for (const r of REFUSED) {
    it(`refuses ${r.name}, at its line with a message a person can act on`, () => {
      const found = faults(r.body);
      const f = found.find((x) => x.path === r.path);
      assert.ok(f, `no fault at ${r.path}; got ${JSON.stringify(found)}`);
      assert.match(f.message, r.message);
      assert.equal(f.line, r.line, JSON.stringify(f));
      assert.equal(typeof f.column, 'number');
      for (const x of found) assert.doesNotMatch(x.message, /must NOT have|must have required property|must match format/, 'no raw ajv text');
    });
  }
});

describe('the core/v1 definitions with the apiserver\'s value rules', () => {
  const generated = { V1Thing: { type: ['object', 'null'], additionalProperties: false, properties: { mode: { type: ['integer', 'null'] }, policy: { type: ['string', 'null'], enum: ['A', 'B', null] } } } } as const;

  it('puts each value rule in place of the generated field it names', () => {
    const defs = coreDefinitions(generated, { 'V1Thing.mode': { type: 'integer', maximum: 511 } });
    assert.deepEqual((defs['V1Thing']!['properties'] as Record<string, unknown>)['mode'], { type: 'integer', maximum: 511 });
    assert.deepEqual(generated.V1Thing.properties.mode, { type: ['integer', 'null'] }, 'the generated definitions are left as they are');
  });

  it('refuses a value rule for a field the core/v1 definitions do not have (renamed or misspelled)', () => {
    assert.throws(() => coreDefinitions(generated, { 'V1Thing.mod': { type: 'integer' } }), /V1Thing\.mod is not a field of the core\/v1 definitions/);
    assert.throws(() => coreDefinitions(generated, { 'V1Other.mode': { type: 'integer' } }), /V1Other\.mode is not a field/);
  });

  it('refuses a value rule that would drop the enum of the OpenAPI definition', () => {
    assert.throws(() => coreDefinitions(generated, { 'V1Thing.policy': { type: 'string', minLength: 1 } }), /V1Thing\.policy would drop the core\/v1 enum/);
  });

  it('holds every value rule the schema uses (checked against the committed core-v1.ts)', () => {
    assert.doesNotThrow(() => coreDefinitions());
  });
});

describe('the template schema at run time', () => {
  // @kubernetes/client-node costs ~60 MB and seconds of start-up, kubernetes-models more: the schema
  // is generated from them at development time (npm run schema) and neither may load with the server.
  for (const module of ['src/templates/load.ts', 'src/main.ts']) {
    it(`loads neither @kubernetes/client-node nor kubernetes-models when ${module} is imported`, () => {
      const hooks = `export async function resolve(specifier, context, next) {
        if (/^(@kubernetes\\/client-node|kubernetes-models|@kubernetes-models\\/)/.test(specifier)) throw new Error('imported at start: ' + specifier + ' from ' + context.parentURL);
        return next(specifier, context);
      }`;
      const register = `import { register } from 'node:module'; register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(hooks)}));`;
      const child = spawnSync(process.execPath, ['--import', 'tsx', '--import', `data:text/javascript,${encodeURIComponent(register)}`, '--input-type=module', '-e', `await import(${JSON.stringify(pathToFileURL(module).href)})`], { encoding: 'utf8' });
      assert.equal(child.status, 0, child.stderr);
    });
  }
});
