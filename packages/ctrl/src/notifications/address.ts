// Which addresses a notifier may send to. The cloud metadata addresses are always refused;
// private, loopback, link-local and other non-public ranges only with
// --notifier-allow-private-addresses. A URL is checked when it is written (its syntax, and its
// host when that is an address), and every address its host name resolves to is checked again
// when a delivery connects — the connection goes to the address checked, so a name that
// resolves elsewhere later (DNS rebinding) gains nothing.
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { BlockList, isIP } from "node:net";

export const MAX_URL_LENGTH = 2048;

/** Instance metadata services of the clouds (AWS, GCP, Azure, OpenStack; AWS's IPv6; Alibaba). */
const METADATA = new BlockList();
METADATA.addAddress("169.254.169.254", "ipv4");
METADATA.addAddress("fd00:ec2::254", "ipv6");
METADATA.addAddress("100.100.100.200", "ipv4");

/** Every range that is not the public internet. */
const PRIVATE = new BlockList();
for (const [net, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
] as const)
  PRIVATE.addSubnet(net, prefix, "ipv4");
for (const [net, prefix] of [
  ["::", 128],
  ["::1", 128],
  ["fc00::", 7],
  ["fe80::", 10],
  ["ff00::", 8],
] as const)
  PRIVATE.addSubnet(net, prefix, "ipv6");

export interface AddressPolicy {
  /** Private, loopback and link-local addresses are allowed (never the metadata addresses). */
  allowPrivate: boolean;
}

/** Why `address` (an IP) is refused, or undefined when it is allowed. */
export function addressRefusal(address: string, policy: AddressPolicy): string | undefined {
  let ip = address.replace(/^\[|\]$/g, "");
  const family = isIP(ip);
  if (family === 0) return `${JSON.stringify(address)} is not an IP address`;
  // An IPv4-mapped IPv6 address is its IPv4 address.
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped) ip = mapped[1]!;
  const type = isIP(ip) === 4 ? "ipv4" : "ipv6";
  if (METADATA.check(ip, type)) return `${ip} is a cloud metadata address: always refused`;
  if (!policy.allowPrivate && PRIVATE.check(ip, type))
    return `${ip} is a private, loopback or link-local address: refused unless ctrl runs with --notifier-allow-private-addresses`;
  return undefined;
}

/** The URL's problem as written (syntax, scheme, credentials, an address host), or undefined. */
export function urlProblem(text: string, policy: AddressPolicy): string | undefined {
  if (text === "") return "is required";
  if (text.length > MAX_URL_LENGTH) return `at most ${MAX_URL_LENGTH} characters`;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return "is not a URL";
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") return "must be http:// or https://";
  if (url.username !== "" || url.password !== "") return "must not carry credentials (user:password@)";
  if (url.hash !== "") return "must not carry a #fragment";
  const host = url.hostname.replace(/^\[|\]$/g, "");
  if (host === "") return "has no host";
  if (isIP(host) !== 0) return addressRefusal(host, policy);
  if (host === "localhost" || host.endsWith(".localhost")) return policy.allowPrivate ? undefined : addressRefusal("127.0.0.1", policy);
  if (host === "metadata.google.internal" || host === "metadata") return `${host} is a cloud metadata address: always refused`;
  return undefined;
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for http.request: resolves like dns.lookup, then refuses the name when any of its
 * addresses is refused, so the connection is only ever made to an address checked here.
 */
export function checkedLookup(policy: AddressPolicy) {
  return (hostname: string, options: { all?: boolean; family?: number }, callback: LookupCallback): void => {
    dnsLookup(hostname, { all: true, family: options.family ?? 0 }, (error, addresses) => {
      if (error) return callback(error, options.all ? [] : "", undefined);
      for (const a of addresses) {
        const refused = addressRefusal(a.address, policy);
        if (refused) {
          const e = Object.assign(new Error(`address refused: ${refused}`), { code: "EADDRREFUSED" }) as NodeJS.ErrnoException;
          return callback(e, options.all ? [] : "", undefined);
        }
      }
      if (options.all) return callback(null, addresses);
      const first = addresses[0]!;
      callback(null, first.address, first.family);
    });
  };
}
