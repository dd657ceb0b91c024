/**
 * Kubernetes resource quantities read exactly, as k8s.io/apimachinery/pkg/api/resource does. The
 * apiserver adds and compares quantities as exact decimals (Quantity.Add, Quantity.Cmp); doubles do
 * not (`9m` read as 9 * 0.001 is above `0.009`, and 0.1 + 0.2 is above 0.3), so a pod that fits
 * exactly would be refused. A quantity here is an integer count of nano-units (10^-9), the finest
 * value a Quantity holds: ParseQuantity rounds a finer one away from zero to it.
 */

/** How a quantity was written, which is how the apiserver prints a sum of it (Quantity.Format). */
const QuantityFormat = { DecimalSI: 'DecimalSI', BinarySI: 'BinarySI', DecimalExponent: 'DecimalExponent' } as const;
type QuantityFormat = (typeof QuantityFormat)[keyof typeof QuantityFormat];

/** An exact quantity: its value in nano-units and the format it prints in. */
export interface Quantity {
  readonly nanos: bigint;
  readonly format: QuantityFormat;
}

/** The suffixes with a fixed meaning (suffix.go): base and exponent. */
const DECIMAL_SUFFIXES: ReadonlyMap<string, number> = new Map([
  ['n', -9],
  ['u', -6],
  ['m', -3],
  ['', 0],
  ['k', 3],
  ['M', 6],
  ['G', 9],
  ['T', 12],
  ['P', 15],
  ['E', 18],
]);
const BINARY_SUFFIXES: ReadonlyMap<string, number> = new Map([
  ['Ki', 10],
  ['Mi', 20],
  ['Gi', 30],
  ['Ti', 40],
  ['Pi', 50],
  ['Ei', 60],
]);

/**
 * parseQuantityString's grammar: a sign, digits, an optional `.` and digits (either may be empty:
 * `5.`, `.5`, even `-` is 0), then a suffix made of the letters eEinumkKMGTP, an optional sign and
 * digits, which interpret() must then recognise. Written so that no two ways match one text (a
 * suffix never begins with a digit), so the match is linear in the text's length: `[a-z]*[+-]?[0-9]*`
 * after `[0-9]*` backtracked quadratically on a long run of digits.
 */
const GRAMMAR = /^([+-]?)([0-9]*)(?:\.([0-9]*))?((?:[eEinumkKMGTP]+[+-]?|[+-])[0-9]*)?$/;
const EXPONENT = /^[eE]([+-]?)0*([0-9]{1,19})$/;
const INT64_MAX = 2n ** 63n - 1n;
const ZERO = 0x30;
const NANOS_PER_UNIT = 10n ** 9n;
/** ParseQuantity caps a binary quantity at the largest int64 (maxAllowed). */
const BINARY_MAX_NANOS = INT64_MAX * NANOS_PER_UNIT;
/**
 * Bounds on the work per quantity (linear in its length): a value of more significant digits than
 * this, or of 10^this nano-units or more, or a text of more than MAX_TEXT characters, is not read
 * (and so refuses nothing); no real request comes near any of them.
 */
const MAX_DIGITS = 128;
/** Characters of a quantity read at all: a longer text (zeros around a value) is not read. */
const MAX_TEXT = 1024;

/**
 * A quantity as the apiserver reads it (resource.ParseQuantity, after UnmarshalJSON trims the
 * spaces), or undefined for text it would refuse or that is beyond the bounds above. Never throws.
 */
export function parseQuantity(text: string): Quantity | undefined {
  if (text.length > MAX_TEXT) return undefined;
  const str = text.trim();
  if (str === '') return undefined;
  const m = GRAMMAR.exec(str);
  if (m === null) return undefined;
  const [, sign = '', whole = '', fraction = '', suffix = ''] = m;
  const unit = interpret(suffix);
  if (unit === undefined) return undefined;
  // Leading zeros of the whole part and trailing zeros of the fraction do not change the value.
  // A loop, not /0+$/: that regex tries every start in a run of zeros (quadratic on `0.000…1`).
  let fractionEnd = fraction.length;
  while (fractionEnd > 0 && fraction.charCodeAt(fractionEnd - 1) === ZERO) fractionEnd--;
  const fracDigits = fraction.slice(0, fractionEnd);
  const digits = (whole + fracDigits).replace(/^0+/, '');
  if (digits.length > MAX_DIGITS) return undefined;
  const magnitude =
    digits === '' ? 0n : unit.base === 10 ? decimalNanos(digits, unit.exponent - fracDigits.length) : binaryNanos(digits, unit.exponent, fracDigits.length);
  if (magnitude === undefined) return undefined;
  // A binary quantity below one is printed as a decimal one (ParseQuantity: "this avoids rounding").
  const format = unit.format === QuantityFormat.BinarySI && magnitude > 0n && magnitude < NANOS_PER_UNIT ? QuantityFormat.DecimalSI : unit.format;
  return { nanos: sign === '-' ? -magnitude : magnitude, format };
}

/**
 * A quantity as a pod holds it: a string from the apiserver, a number from another client (the
 * apiserver's UnmarshalJSON reads a JSON number's text, which String() gives back for any double
 * JSON.parse made). Undefined for anything else.
 */
export function quantityOf(value: unknown): Quantity | undefined {
  if (typeof value === 'string') return parseQuantity(value);
  if (typeof value === 'number' && Number.isFinite(value)) return parseQuantity(String(value));
  return undefined;
}

/** The suffix's base, exponent and format (suffixHandler.interpret), or undefined for an unknown suffix. */
function interpret(suffix: string): { base: 2 | 10; exponent: number; format: QuantityFormat } | undefined {
  const decimal = DECIMAL_SUFFIXES.get(suffix);
  if (decimal !== undefined) return { base: 10, exponent: decimal, format: QuantityFormat.DecimalSI };
  const binary = BINARY_SUFFIXES.get(suffix);
  if (binary !== undefined) return { base: 2, exponent: binary, format: QuantityFormat.BinarySI };
  // `e<n>`: strconv.ParseInt(n, 10, 64), which refuses a value beyond int64, then int32(n), which wraps.
  const e = EXPONENT.exec(suffix);
  if (e === null) return undefined;
  const exponent = BigInt(`${e[1] ?? ''}${e[2] ?? ''}`);
  if (exponent > INT64_MAX || exponent < -INT64_MAX - 1n) return undefined;
  return { base: 10, exponent: Number(BigInt.asIntN(32, exponent)), format: QuantityFormat.DecimalExponent };
}

/** `digits` * 10^scale in nano-units, rounded up (away from zero) to a whole nano-unit as ParseQuantity does. */
function decimalNanos(digits: string, scale: number): bigint | undefined {
  const shift = scale + 9;
  if (digits.length + shift > MAX_DIGITS) return undefined;
  if (shift >= 0) return BigInt(digits) * 10n ** BigInt(shift);
  const kept = digits.length + shift;
  // Every digit is below a nano-unit: a non-zero value rounds up to 1n, so that a request is never 0.
  if (kept <= 0) return 1n;
  const dropped = /[1-9]/.test(digits.slice(kept));
  return BigInt(digits.slice(0, kept)) + (dropped ? 1n : 0n);
}

/** `digits` / 10^fractionLength * 2^exponent in nano-units, rounded up, capped as ParseQuantity caps a binary quantity. */
function binaryNanos(digits: string, exponent: number, fractionLength: number): bigint {
  // Below 10^-28 times the digits, even 2^60 leaves the value under a nano-unit: it rounds up to 1n.
  if (fractionLength - digits.length > 28) return 1n;
  const scaled = BigInt(digits) * 2n ** BigInt(exponent) * NANOS_PER_UNIT;
  const divisor = 10n ** BigInt(fractionLength);
  const nanos = scaled / divisor + (scaled % divisor === 0n ? 0n : 1n);
  return nanos > BINARY_MAX_NANOS ? BINARY_MAX_NANOS : nanos;
}

/**
 * A quantity as the apiserver prints it (Quantity.String, CanonicalizeBytes): the largest suffix of
 * its format that leaves no fraction, `1536Mi` for 1.5Gi, `1500m` for 1.5, `12e3` for 1.2e4.
 */
export function formatQuantity(q: Quantity): string {
  if (q.nanos === 0n) return '0';
  const negative = q.nanos < 0n;
  const magnitude = negative ? -q.nanos : q.nanos;
  const sign = negative ? '-' : '';
  // BinarySI only for a whole number of units of 1024 or more; anything else would need rounding.
  if (q.format === QuantityFormat.BinarySI && magnitude >= 1024n * NANOS_PER_UNIT && magnitude % NANOS_PER_UNIT === 0n) {
    let units = magnitude / NANOS_PER_UNIT;
    let exponent = 0;
    while (exponent < 60 && units % 1024n === 0n) {
      units /= 1024n;
      exponent += 10;
    }
    return `${sign}${units}${[...BINARY_SUFFIXES].find(([, e]) => e === exponent)?.[0] ?? ''}`;
  }
  let mantissa = magnitude;
  let exponent = -9;
  while (mantissa % 10n === 0n) {
    mantissa /= 10n;
    exponent += 1;
  }
  // The exponent goes down to a multiple of three (AsCanonicalBytes), so a suffix fits.
  while (exponent % 3 !== 0) {
    mantissa *= 10n;
    exponent -= 1;
  }
  const decimal = q.format !== QuantityFormat.DecimalExponent ? [...DECIMAL_SUFFIXES].find(([, e]) => e === exponent)?.[0] : undefined;
  // DecimalSI has no suffix beyond E (10^18): the apiserver falls back to the exponent form.
  const suffix = decimal ?? (exponent === 0 ? '' : `e${exponent}`);
  return `${sign}${mantissa}${suffix}`;
}
