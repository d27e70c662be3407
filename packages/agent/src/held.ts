// What the agent knows a live object holds: the digest of the content it applies to the object,
// once the full object was seen to contain that content (compared in canonical form, compare.ts).
// The observer stores the digest with the object's cached record; an apply of the same content
// to the object at that resourceVersion is skipped (a restart then applies nothing that is
// already there), and a change of the object is checked again when its watch event arrives.
import { createHash } from "node:crypto";
import { containsCanonical } from "./compare.ts";
import { tracksDesiredVersion, withoutDesiredVersion, type KubeObject } from "./manifests.ts";

/**
 * Bytes of SHA-1 kept (base64: 8 characters, one per object in the cache, where they are the
 * largest part of a record that does not repeat from one object to the next). A digest is only
 * ever compared with the one of the same object's next manifest: a false match, which would skip
 * one apply of changed content, has odds of 2^-48 per comparison.
 */
const DIGEST_BYTES = 6;

/**
 * What an apply of the manifest `object` must find in the live object: all of it, except the
 * desired-version annotation of an object that does not track it (a Service keeps the version it
 * was last applied from, so that a new version with the same Service content writes nothing).
 */
export function appliedForm(object: KubeObject): KubeObject {
  return tracksDesiredVersion(object) ? object : withoutDesiredVersion(object);
}

/** Digest of the applied form of the manifest `object`. */
export function contentDigest(object: KubeObject): string {
  return createHash("sha1")
    .update(JSON.stringify(appliedForm(object)))
    .digest()
    .subarray(0, DIGEST_BYTES)
    .toString("base64");
}

/** The digest of `wanted` (a manifest) if the full live object holds its applied form, else undefined. */
export function heldDigest(live: KubeObject, wanted: KubeObject): string | undefined {
  return containsCanonical(live, appliedForm(wanted)) ? contentDigest(wanted) : undefined;
}
