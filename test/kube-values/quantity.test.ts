import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatQuantity, parseQuantity, quantityOf } from '../../src/kube-values/quantity.js';

const nanos = (text: string): bigint | undefined => parseQuantity(text)?.nanos;
/** As the apiserver stores a quantity it was sent: parsed, then printed in canonical form. */
const canonical = (text: string): string | undefined => {
  const q = parseQuantity(text);
  return q && formatQuantity(q);
};

describe('Kubernetes quantities, read exactly', () => {
  it('reads every suffix of the grammar: decimal SI, binary SI and a decimal exponent', () => {
    const G = 10n ** 9n;
    for (const [text, value] of [
      ['1n', 1n],
      ['1u', 1000n],
      ['1m', 10n ** 6n],
      ['1', G],
      ['1k', 10n ** 3n * G],
      ['1M', 10n ** 6n * G],
      ['1G', 10n ** 9n * G],
      ['1T', 10n ** 12n * G],
      ['1P', 10n ** 15n * G],
      ['1E', 10n ** 18n * G],
      ['1Ki', 2n ** 10n * G],
      ['1Mi', 2n ** 20n * G],
      ['1Gi', 2n ** 30n * G],
      ['1Ti', 2n ** 40n * G],
      ['1Pi', 2n ** 50n * G],
      ['1Ei', 2n ** 60n * G],
      ['1e3', 10n ** 3n * G],
      ['1E3', 10n ** 3n * G],
      ['1e+3', 10n ** 3n * G],
      ['25e-3', 25n * 10n ** 6n],
      ['.5', G / 2n],
      ['5.', 5n * G],
      ['+1.5Gi', 3n * 2n ** 29n * G],
      ['-2m', -2n * 10n ** 6n],
      ['0007', 7n * G],
      ['0', 0n],
      ['  250m ', 250n * 10n ** 6n],
    ] as const) {
      assert.equal(nanos(text), value, text);
    }
  });

  it('reads the same value the same whatever the suffix (a double reads 9m above 0.009)', () => {
    for (let m = 1; m <= 4000; m++) assert.equal(nanos(`${m}m`), nanos(String(m / 1000)), `${m}m`);
    assert.equal(nanos('0.1'), nanos('100m'));
    assert.equal(nanos('1e3'), nanos('1k'));
    assert.equal(nanos('1Gi'), 2n * nanos('512Mi')!);
  });

  it('rounds a value finer than a nano-unit up, away from zero, as ParseQuantity does', () => {
    assert.equal(nanos('0.0000000001'), 1n);
    assert.equal(nanos('1e-30'), 1n);
    assert.equal(nanos('1.0000000001'), 1_000_000_001n);
    assert.equal(nanos('1.00000000000000000000'), 1_000_000_000n);
    assert.equal(nanos('-0.0000000001'), -1n);
    assert.equal(nanos('0.1n'), 1n);
    assert.equal(nanos('0.000000000000Ki'), 0n);
    assert.equal(nanos('0.001Ki'), 1_024_000_000n);
    assert.equal(nanos('0.0000000001Ki'), 103n); // 102.4 nano-units, rounded up
  });

  it('caps a binary quantity at the largest int64, as ParseQuantity does', () => {
    assert.equal(nanos('16Ei'), (2n ** 63n - 1n) * 10n ** 9n);
    assert.equal(nanos('16E'), 16n * 10n ** 27n);
  });

  it('reads the exponent as the apiserver does: an int64, then wrapped to int32', () => {
    assert.equal(nanos('1e4294967296'), 10n ** 9n);
    assert.equal(nanos('1e9223372036854775808'), undefined);
  });

  it('refuses what the apiserver refuses, without throwing', () => {
    for (const text of ['', ' ', 'lots', '1.5.5', '1 Gi', '1KiB', '1K', '1e', '1e3.5', '1ee3', '1mi', '--1', '1Mi3', '0x10', '１', '1e1e1', '1_000']) {
      assert.equal(parseQuantity(text), undefined, JSON.stringify(text));
    }
  });

  it('reads the odd forms the apiserver accepts: a lone sign or a suffix alone is zero', () => {
    for (const text of ['-', '+', '.', 'Ki', 'm']) assert.equal(nanos(text), 0n, text);
  });

  it('leaves unread a value of more significant digits or magnitude than any request (bounded work)', () => {
    assert.equal(parseQuantity('1'.repeat(129)), undefined);
    assert.equal(parseQuantity('1e2000000000'), undefined);
    assert.equal(nanos(`0.${'0'.repeat(1000)}1`), 1n);
    // Past 1024 characters nothing is read; up to them, the work is linear (a regex that was
    // quadratic on runs of zeros or digits took seconds here).
    const started = performance.now();
    for (const text of [`0.${'0'.repeat(1020)}1`, `0.${'0'.repeat(200_000)}1`, `${'1'.repeat(1022)}x`, `${'1'.repeat(500)}.${'1'.repeat(500)}x`])
      parseQuantity(text);
    assert.equal(parseQuantity(`0.${'0'.repeat(200_000)}1`), undefined);
    assert.ok(performance.now() - started < 1000, 'four hostile quantities took over a second');
    assert.equal(nanos(`1${'0'.repeat(100)}`), 10n ** 109n);
  });

  it('reads a JSON number by its text, and nothing else', () => {
    assert.equal(quantityOf(0.009)?.nanos, nanos('9m'));
    assert.equal(quantityOf(1e21)?.nanos, 10n ** 30n);
    for (const odd of [null, undefined, true, {}, [], Number.NaN, Number.POSITIVE_INFINITY]) assert.equal(quantityOf(odd), undefined);
  });

  it('prints a quantity in canonical form, as the apiserver stores it', () => {
    for (const [text, printed] of [
      ['1.5', '1500m'],
      ['1.5Gi', '1536Mi'],
      ['0.3', '300m'],
      ['1000m', '1'],
      ['1500000', '1500k'],
      ['1e3', '1e3'],
      ['1.2e4', '12e3'],
      ['100Mi', '100Mi'],
      ['1023Ki', '1023Ki'],
      ['0.5Ki', '512'],
      ['1.1Ki', '1126400m'],
      ['1n', '1n'],
      ['0.0000000001', '1n'],
      ['1000E', '1e21'],
      ['-2Gi', '-2Gi'],
      ['0', '0'],
      ['0Mi', '0'],
      ['100', '100'],
    ] as const) {
      assert.equal(canonical(text), printed, text);
    }
  });
});
