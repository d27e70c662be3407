// What the kubernetes target last applied to each object that does not track the desired
// version (a Service): the digest of the content it applied and the resourceVersion that apply
// wrote. While both still hold, applying the same content again is skipped. One entry per such
// object (100,000 with 100,000 resources), so an entry is ONE string: the SHA-1 digest as 20
// one-byte characters followed by the resourceVersion (an object with a base64 digest and a
// resourceVersion string cost about twice as much).
import { createHash } from "node:crypto";
import { withoutDesiredVersion, type KubeObject } from "../manifests.ts";

/** Length of a content digest (SHA-1, one character per byte: "binary" is latin1). */
const DIGEST_LENGTH = 20;

/** Digest of what an apply of `object` would make of it, apart from the desired version. */
export function contentDigest(object: KubeObject): string {
  return createHash("sha1")
    .update(JSON.stringify(withoutDesiredVersion(object)))
    .digest("binary");
}

/** What this process last applied to an object: its content's digest and the resourceVersion written. */
export interface LastApply {
  digest: string;
  resourceVersion: string;
}

/** LastApply by describeObject() name. */
export class LastApplied {
  readonly #entries = new Map<string, string>();

  get(name: string): LastApply | undefined {
    const entry = this.#entries.get(name);
    return entry === undefined ? undefined : { digest: entry.slice(0, DIGEST_LENGTH), resourceVersion: entry.slice(DIGEST_LENGTH) };
  }

  /** `digest` must come from contentDigest(). */
  set(name: string, { digest, resourceVersion }: LastApply): void {
    if (digest.length !== DIGEST_LENGTH) throw new Error(`a content digest has ${DIGEST_LENGTH} characters, not ${digest.length}`);
    // join() makes a flat string; `+` would keep a rope of the two parts (two more objects).
    this.#entries.set(name, [digest, resourceVersion].join(""));
  }

  delete(name: string): void {
    this.#entries.delete(name);
  }
}
