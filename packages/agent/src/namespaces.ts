// Which namespaces the agent may write into (--allowed-namespaces / --denied-namespaces): glob
// lists, a denied match wins over an allowed one. The system namespaces are denied by default:
// workloads there could replace cluster components, and `default` is where strays collect.

export const SYSTEM_NAMESPACES = ["kube-system", "kube-public", "kube-node-lease", "default"] as const;

export interface NamespaceRules {
  /** Globs (`*` any run of characters, `?` one) a namespace must match. Default: everything. */
  allowed: readonly string[];
  /** Globs no namespace may match; wins over `allowed`. Default: SYSTEM_NAMESPACES. */
  denied: readonly string[];
}

export const DEFAULT_NAMESPACE_RULES: NamespaceRules = { allowed: ["*"], denied: SYSTEM_NAMESPACES };

/** Why the agent refuses to write into `namespace`, or undefined if it may. */
export function namespaceRefusal(namespace: string, rules: NamespaceRules): string | undefined {
  const denied = rules.denied.find((glob) => globMatches(glob, namespace));
  if (denied !== undefined) return `namespace ${namespace} is refused by this agent (it matches denied namespace ${JSON.stringify(denied)})`;
  if (!rules.allowed.some((glob) => globMatches(glob, namespace))) {
    return `namespace ${namespace} is refused by this agent (not among the allowed namespaces ${rules.allowed.join(",")})`;
  }
  return undefined;
}

/** A comma-separated glob list from a flag ("" is an empty list). */
export function parseGlobList(text: string): string[] {
  return text
    .split(",")
    .map((glob) => glob.trim())
    .filter((glob) => glob !== "");
}

function globMatches(glob: string, value: string): boolean {
  const pattern = glob
    .replace(/[.+^${}()|[\]\\]/g, "\\$&")
    .replaceAll("*", ".*")
    .replaceAll("?", ".");
  return new RegExp(`^${pattern}$`).test(value);
}
