// Request body decoding. Clients almost always send JSON (also for
// `application/apply-patch+yaml`, since JSON is valid YAML), so JSON is tried
// first; anything else goes through the `yaml` package with YAML 1.1 rules
// (`yes`/`on` are booleans, `0755` is octal), which is what the real server's
// sigs.k8s.io/yaml (a go-yaml v2 fork) implements. Duplicate keys are an
// error there too.
import { parseDocument } from "yaml";

export class DecodeError extends Error {}

export function decodeBody(text: string): unknown {
  const trimmed = text.trim();
  if (trimmed === "") throw new DecodeError("empty body");
  if (trimmed.startsWith("{") || trimmed.startsWith("[")) {
    try {
      return JSON.parse(trimmed);
    } catch {
      // A flow-style YAML document can still be valid: let the YAML parser decide.
    }
  }
  const doc = parseDocument(text, { version: "1.1", uniqueKeys: true, prettyErrors: false });
  if (doc.errors.length > 0) throw new DecodeError(doc.errors[0].message);
  return doc.toJS({ maxAliasCount: 100 });
}
