// Whether a live object already holds what the agent would apply, compared in the API server's
// canonical form rather than as raw strings (docs/semantic-comparison.md argues the choice).
// The API server rewrites what it stores: quantities to their canonical form ("1000m" reads back
// as "1", "1024Mi" as "1Gi"), empty optional values dropped (an env var's `value: ""`),
// defaults filled in. Comparing raw strings would see drift in every such field and re-apply
// forever, so values are compared by meaning:
//
// * fields the live object has beyond ours (defaults, other field managers) are ignored;
// * an empty string, list or object we want matches an absent field (Go's omitempty);
// * resources.requests / resources.limits compare as quantities (exact rational values);
// * int-or-string fields compare an integer with its decimal string form.

/** Fields of type IntOrString in what the agent applies (apps/v1 Deployment strategy, v1 Service, probes, policy/v1 PodDisruptionBudget). */
const INT_OR_STRING_FIELDS = new Set(["targetPort", "maxSurge", "maxUnavailable", "port", "minAvailable"]);

/** Whether every field of `wanted` has its value, in canonical form, in `live`. List items are compared by position. */
export function containsCanonical(live: unknown, wanted: unknown, path: readonly string[] = []): boolean {
  if (isEmpty(wanted) && (live === undefined || isEmpty(live))) return true;
  if (Array.isArray(wanted))
    return Array.isArray(live) && live.length >= wanted.length && wanted.every((item, i) => containsCanonical(live[i], item, [...path, String(i)]));
  if (wanted !== null && typeof wanted === "object") {
    if (live === null || typeof live !== "object" || Array.isArray(live)) return false;
    return Object.entries(wanted).every(([field, value]) => containsCanonical((live as Record<string, unknown>)[field], value, [...path, field]));
  }
  if (live === wanted) return true;
  if (isQuantityPath(path)) return sameQuantity(live, wanted);
  if (INT_OR_STRING_FIELDS.has(path.at(-1) ?? "")) return intOrString(live) !== undefined && intOrString(live) === intOrString(wanted);
  return false;
}

function isEmpty(value: unknown): boolean {
  if (value === "" || value === null) return true;
  if (Array.isArray(value)) return value.length === 0;
  return typeof value === "object" && Object.keys(value).length === 0;
}

/** `…resources.requests.<name>` or `…resources.limits.<name>`. */
function isQuantityPath(path: readonly string[]): boolean {
  const parent = path.at(-2);
  return (parent === "requests" || parent === "limits") && path.at(-3) === "resources";
}

function intOrString(value: unknown): string | undefined {
  if (typeof value === "number" && Number.isInteger(value)) return String(value);
  return typeof value === "string" ? value : undefined;
}

function sameQuantity(a: unknown, b: unknown): boolean {
  const x = parseQuantity(a);
  const y = parseQuantity(b);
  return x !== undefined && y !== undefined && x.numerator * y.denominator === y.numerator * x.denominator;
}

/** An exact rational value. */
interface Rational {
  numerator: bigint;
  denominator: bigint;
}

// resource.Quantity's grammar (k8s.io/apimachinery/pkg/api/resource/quantity.go):
// <signedNumber><suffix>, suffix binary SI (Ki..Ei), decimal SI (n u m "" k M G T P E) or a
// decimal exponent (e3, E-6).
const QUANTITY = /^([+-]?)(\d*)(?:\.(\d*))?(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$/;
const BINARY_POWERS: Record<string, bigint> = { Ki: 10n, Mi: 20n, Gi: 30n, Ti: 40n, Pi: 50n, Ei: 60n };
const DECIMAL_EXPONENTS: Record<string, number> = { n: -9, u: -6, m: -3, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };

/** A quantity's exact value, or undefined if it is not one. Numbers (JSON ints) are quantities too. */
export function parseQuantity(value: unknown): Rational | undefined {
  const text = typeof value === "number" && Number.isFinite(value) ? String(value) : value;
  if (typeof text !== "string") return undefined;
  const match = QUANTITY.exec(text);
  if (!match) return undefined;
  const [, sign = "", whole = "", fraction = "", suffix = ""] = match;
  if (whole === "" && fraction === "") return undefined;
  let numerator = BigInt(`${sign}${whole}${fraction}` || "0");
  let denominator = 10n ** BigInt(fraction.length);
  if (suffix in BINARY_POWERS) {
    numerator *= 2n ** BINARY_POWERS[suffix]!;
  } else if (suffix !== "") {
    const exponent = DECIMAL_EXPONENTS[suffix] ?? Number(suffix.slice(1));
    if (exponent >= 0) numerator *= 10n ** BigInt(exponent);
    else denominator *= 10n ** BigInt(-exponent);
  }
  return { numerator, denominator };
}
