// Label keys and values as Kubernetes validates them, with its messages
// (k8s.io/apimachinery/pkg/util/validation: IsQualifiedName for keys, IsValidLabelValue for values).
//
//   key   = [prefix "/"] name    prefix: a DNS-1123 subdomain, at most 253 characters
//                                name:   at most 63 of [A-Za-z0-9-_.], alphanumeric at both ends
//   value = "" | at most 63 of [A-Za-z0-9-_.], alphanumeric at both ends

const MAX_PREFIX_LENGTH = 253;
const MAX_NAME_LENGTH = 63;
const MAX_VALUE_LENGTH = 63;

const NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

const NAME_MESSAGE =
  "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const SUBDOMAIN_MESSAGE =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const VALUE_MESSAGE =
  "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/** What is wrong with `value` as a DNS-1123 subdomain (a key's prefix, many object names); undefined when it is one. */
export function dns1123SubdomainProblem(value: string): string | undefined {
  if (value.length > MAX_PREFIX_LENGTH) return `must be no more than ${MAX_PREFIX_LENGTH} characters`;
  if (!DNS1123_SUBDOMAIN.test(value)) return SUBDOMAIN_MESSAGE;
  return undefined;
}

/** What is wrong with `key` as a label (or annotation) key; undefined when it is a valid one. */
export function labelKeyProblem(key: string): string | undefined {
  const parts = key.split("/");
  if (parts.length > 2) return `a qualified name ${NAME_MESSAGE} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`;
  const name = parts.at(-1)!;
  if (parts.length === 2) {
    const prefix = parts[0]!;
    if (prefix === "") return "prefix part must be non-empty";
    const problem = dns1123SubdomainProblem(prefix);
    if (problem) return `prefix part ${problem}`;
  }
  if (name === "") return "name part must be non-empty";
  if (name.length > MAX_NAME_LENGTH) return `name part must be no more than ${MAX_NAME_LENGTH} characters`;
  if (!NAME.test(name)) return `name part ${NAME_MESSAGE}`;
  return undefined;
}

/** What is wrong with `value` as a label value; undefined when it is a valid one (the empty value is). */
export function labelValueProblem(value: string): string | undefined {
  if (value.length > MAX_VALUE_LENGTH) return `must be no more than ${MAX_VALUE_LENGTH} characters`;
  if (value !== "" && !NAME.test(value)) return VALUE_MESSAGE;
  return undefined;
}
