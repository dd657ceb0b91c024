import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { clusterSet, compileObject, type TemplateObject } from '../../src/templates/cluster.js';
import { compileTemplateSet } from '../../src/templates/load.js';
import type { CompiledTemplate } from '../../src/templates/template.js';
import { sct } from '../helpers/sidecartemplates.js';

const HOME = 'sidecar-injector';

function compiled(namespace: string, name: string, container: string, isDefault: boolean): CompiledTemplate {
  const obj: TemplateObject = { apiVersion: 'sidecar-injector.io/v1alpha1', kind: 'SidecarTemplate', metadata: { name, namespace }, spec: { default: isDefault, containers: [{ name: container, image: `registry.example.com/${name}:1` }] } };
  const result = compileObject(obj);
  assert.ok(result.ok);
  return result.template;
}

/** A directory of one default template `agent` (container "agent"), as --templates-source both reads it. */
const directory = compileTemplateSet([{ file: 'agent.yaml', text: 'apiVersion: sidecar-injector.io/v1alpha1\nkind: SidecarTemplate\nmetadata: {name: agent}\nspec:\n  default: true\n  containers: [{name: agent, image: registry.example.com/agent:1}]\n' }], 'dir');

describe('clusterSet: default templates that clash (issue 23)', () => {
  it("refuses a cluster-wide default that clashes with the directory's, naming the directory's as the one served", () => {
    const { set, refused } = clusterSet([{ key: `${HOME}/other`, created: '2026-01-01T00:00:01Z', candidates: [compiled(HOME, 'other', 'agent', true)] }], HOME, directory);
    assert.deepEqual(set.defaults.map((t) => t.name), ['agent']);
    assert.match(refused.get(`${HOME}/other`)?.[0]?.message ?? '', /container "agent" is defined by both .*; the directory's template "agent" is served$/);
  });

  it('does not hold a default against a directory template that a cluster-wide object shadows (and so is no default)', () => {
    const objects = [
      { key: `${HOME}/agent`, created: '2026-01-01T00:00:01Z', candidates: [compiled(HOME, 'agent', 'agent', false)] },
      { key: `${HOME}/other`, created: '2026-01-01T00:00:02Z', candidates: [compiled(HOME, 'other', 'agent', true)] },
    ];
    const { set, refused } = clusterSet(objects, HOME, directory);
    assert.deepEqual([...refused.keys()], []);
    assert.deepEqual(set.defaults.map((t) => t.name), ['other']);
  });
});

describe('clusterSet: time linear in the number of objects', () => {
  // 2000 defaults of one namespace took 8.8 s checked pair by pair: every rebuild, after any
  // event anywhere, on the thread that answers reviews. One claims map per scope makes it linear.
  const objects = Array.from({ length: 2000 }, (_, i) => ({ key: `team-a/d${i}`, created: `2026-01-01T00:00:00Z`, candidates: [compiled('team-a', `d${i}`, `c${i}`, true)] }));
  const clash = { key: 'team-a/zz-clash', created: '2026-01-01T00:00:01Z', candidates: [compiled('team-a', 'zz-clash', 'c7', true)] };

  it('2000 defaults in one namespace: all served, a clashing newer one refused, a rebuild well under a second', (t) => {
    clusterSet(objects, HOME); // the first build renders each default once
    const start = performance.now();
    const { set, refused } = clusterSet([...objects, clash], HOME);
    const ms = performance.now() - start;
    assert.equal(set.namespaces?.get('team-a')?.defaults.length, 2000);
    assert.deepEqual([...refused.keys()], ['team-a/zz-clash']);
    assert.match(refused.get('team-a/zz-clash')?.[0]?.message ?? '', /container "c7" is defined by both template "d7" and template "zz-clash".*the older object "d7" is served/);
    t.diagnostic(`a rebuild of 2001 defaults: ${ms.toFixed(0)} ms`);
    assert.ok(ms < 1000, `a rebuild of 2001 defaults took ${ms.toFixed(0)} ms`);
  });
});

describe('clusterSet: an object over a budget falls back to the version already served', () => {
  const MiB = 1024 * 1024;
  /** Eight teams' objects of 1 MiB each (their weight against the budgets), 2 per team: the whole 16 MiB, all served as they are. */
  const served = ['team-a', 'team-b', 'team-c', 'team-d', 'team-e', 'team-f', 'team-g', 'team-h'].flatMap((ns, n) =>
    Array.from({ length: 2 }, (_, i) => ({
      key: `${ns}/t${i}`,
      created: `2026-01-01T00:0${n}:0${i}Z`,
      candidates: [compiled(ns, `t${i}`, `c${i}`, false)],
      bytes: MiB,
      incumbent: true,
    })),
  );

  it("near the 16 MiB total, one team's grown object is refused and its served version kept; every other team's objects stay served", () => {
    // team-a's oldest object grows by a byte: its new version is not served as it is yet (not incumbent).
    const grown = { ...served[0]!, candidates: [compiled('team-a', 't0', 'c0', false), served[0]!.candidates[0]!], bytes: MiB + 1, servedBytes: MiB, incumbent: false };
    const { served: kept, refused } = clusterSet([grown, ...served.slice(1)], HOME);
    assert.deepEqual([...refused.keys()], ['team-a/t0']);
    assert.match(refused.get('team-a/t0')?.[0]?.message ?? '', /the objects of all namespaces ahead of this one \(.*\) already hold \d+ of the 16777216 bytes/);
    assert.equal(kept.get('team-a/t0'), served[0]!.candidates[0], 'the version served before');
    assert.equal(kept.size, 16, 'every object of every team still served');
  });

  it('refuses a new object past the total, however old its creationTimestamp, and serves it once room is made', () => {
    const newcomer = { key: 'team-x/new', created: '2025-01-01T00:00:00Z', candidates: [compiled('team-x', 'new', 'n', false)], bytes: 64 * 1024 };
    const { served: kept, refused } = clusterSet([newcomer, ...served], HOME);
    assert.deepEqual([...refused.keys()], ['team-x/new']);
    assert.equal(kept.size, 16);
    const roomy = clusterSet([newcomer, ...served.slice(1)], HOME);
    assert.deepEqual([...roomy.refused.keys()], []);
  });

  it('decides the same whatever order the objects come in (every replica lists them in its own order)', () => {
    const grown = { ...served[5]!, bytes: MiB + 10, incumbent: false };
    const objects = [...served.slice(0, 5), grown, ...served.slice(6)];
    const once = [...clusterSet(objects, HOME).refused.keys()];
    const reversed = [...clusterSet([...objects].reverse(), HOME).refused.keys()];
    assert.deepEqual(once, ['team-c/t1']);
    assert.deepEqual(reversed, once);
  });
});

describe('compileObject: hostile values', () => {
  it('judges a SidecarTemplate whose values crash the schema check as invalid, never throwing (hostile values)', () => {
    const obj = sct('team-a', 'hostile', 'registry.example.com/a:1', { overrides: [{}, { valueOf: [] }] }) as TemplateObject;
    const result = compileObject(obj);
    assert.equal(result.ok, false);
    assert.match(result.ok ? '' : result.faults.map((f) => f.message).join('\n'), /cannot compare/);
  });
});
