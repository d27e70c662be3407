// resource.Quantity as the API server reads and writes it: parsed, rounded up
// to nano units and serialized in canonical form. Follows
// k8s.io/apimachinery/pkg/api/resource/quantity.go (ParseQuantity,
// CanonicalizeBytes) and amount.go (AsCanonicalBytes,
// AsCanonicalBase1024Bytes). Examples: "1000m" -> "1", "0.5" -> "500m",
// "1024Mi" -> "1Gi", "1.5Gi" -> "1536Mi", "0.5Ki" -> "512", "1e4" -> "10e3".

/** The error the server reports for an unparsable quantity. */
export const QUANTITY_FORMAT_ERROR = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

export class QuantityError extends Error {}

type Format = "DecimalSI" | "BinarySI" | "DecimalExponent";

const DECIMAL_SUFFIXES: Record<string, number> = { n: -9, u: -6, m: -3, "": 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };
const BINARY_SUFFIXES: Record<string, number> = { Ki: 10, Mi: 20, Gi: 30, Ti: 40, Pi: 50, Ei: 60 };
const DECIMAL_BY_EXPONENT = new Map(Object.entries(DECIMAL_SUFFIXES).map(([s, e]) => [e, s]));
const BINARY_BY_EXPONENT = new Map(Object.entries(BINARY_SUFFIXES).map(([s, e]) => [e, s]));
const MAX_INT64 = (1n << 63n) - 1n;
/** Same scanner as parseQuantityString: sign, digits, optional fraction, suffix. */
const SCAN = /^([+-]?)0*([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*[-+]?[0-9]*)$/;

function interpretSuffix(suffix: string): { base: 10 | 2; exponent: number; format: Format } {
  if (suffix in DECIMAL_SUFFIXES) return { base: 10, exponent: DECIMAL_SUFFIXES[suffix], format: "DecimalSI" };
  if (suffix in BINARY_SUFFIXES) return { base: 2, exponent: BINARY_SUFFIXES[suffix], format: "BinarySI" };
  if (suffix.length > 1 && (suffix[0] === "e" || suffix[0] === "E") && /^[+-]?\d+$/.test(suffix.slice(1))) {
    return { base: 10, exponent: Number(suffix.slice(1)), format: "DecimalExponent" };
  }
  throw new QuantityError("unable to parse quantity's suffix");
}

const pow10 = (n: number): bigint => 10n ** BigInt(n);

/** Canonical string of a quantity given as a JSON string or number (Quantity.UnmarshalJSON accepts both). */
export function canonicalQuantity(input: string | number): string {
  const str = typeof input === "number" ? String(input) : input.trim();
  if (str === "") throw new QuantityError(QUANTITY_FORMAT_ERROR);
  if (str === "0") return "0";
  const m = SCAN.exec(str);
  if (!m) throw new QuantityError(QUANTITY_FORMAT_ERROR);
  const negative = m[1] === "-";
  const num = m[2] || "0";
  const denom = m[3] ?? "";
  const { exponent, format: parsedFormat } = interpretSuffix(m[4]);
  let format = parsedFormat;
  const shifted = num + denom;

  // Fast path of ParseQuantity: a value already in canonical form keeps the
  // string it was written as (sign and leading zeros included).
  const precision = format === "BinarySI" ? (denom.length === 0 ? 15 - num.length - Math.trunc((exponent * 3) / 10) - 1 : -1) : 18 - shifted.length;
  const scale = (format === "BinarySI" ? 0 : exponent) - denom.length;
  if (precision >= 0 && scale >= -9) {
    const value = BigInt(shifted);
    const keep = format === "BinarySI" ? exponent % 10 === 0 && (value & 7n) !== 0n : scale % 3 === 0 && !shifted.endsWith("000") && shifted[0] !== "0";
    if (keep) return str;
  }

  // The exact magnitude as mantissa * 10^e.
  let mantissa = BigInt(shifted) * (format === "BinarySI" ? 1n << BigInt(exponent) : 1n);
  let e = format === "BinarySI" ? -denom.length : exponent - denom.length;
  // Non-zero values are rounded up to the smallest unit, 1n.
  if (e < -9) {
    const div = pow10(-9 - e);
    mantissa = (mantissa + div - 1n) / div;
    e = -9;
  }
  if (mantissa === 0n) return "0";
  if (format === "BinarySI" && (e >= 0 ? mantissa * pow10(e) : mantissa) > MAX_INT64 * (e < 0 ? pow10(-e) : 1n)) {
    mantissa = MAX_INT64;
    e = 0;
  }
  const sign = negative ? "-" : "";

  if (format === "BinarySI") {
    const integer = e >= 0 ? mantissa * pow10(e) : mantissa % pow10(-e) === 0n ? mantissa / pow10(-e) : undefined;
    // Below 1024, or not a whole number: shown as DecimalSI to avoid rounding.
    if (integer === undefined || integer < 1024n) format = "DecimalSI";
    else {
      let amount = integer;
      let power = 0;
      while (amount % 1024n === 0n) {
        amount /= 1024n;
        power++;
      }
      return `${sign}${amount}${BINARY_BY_EXPONENT.get(power * 10) ?? ""}`;
    }
  }
  // Decimal: move factors of ten into the exponent, then make it a multiple of 3.
  while (mantissa % 10n === 0n) {
    mantissa /= 10n;
    e++;
  }
  while (e % 3 !== 0) {
    mantissa *= 10n;
    e--;
  }
  let suffix: string;
  if (format === "DecimalSI" && DECIMAL_BY_EXPONENT.has(e)) suffix = DECIMAL_BY_EXPONENT.get(e)!;
  else suffix = e === 0 ? "" : `e${e}`;
  return `${sign}${mantissa}${suffix}`;
}
