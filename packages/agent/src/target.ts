// Where desired state goes: a Kubernetes cluster, or a directory of manifests. Every method is
// idempotent, so the work queue may retry any call after any failure.
import type { KubeClient } from "./kube-api.ts";
import type { DesiredResource, ResourceTombstone, ResourceType } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { resourceKey } from "./keys.ts";
import { isManagedBy, resourceOfLabels } from "./manifests.ts";

/** One object of this region that carries the managed-by and region labels. */
export interface ManagedObject {
  /** The resource from the object's type and id labels, and its key ("deployment/web"). */
  type: ResourceType;
  id: string;
  key: string;
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
}

/** The ManagedObject an object listed by a target is, or undefined if it is not managed in `region`. */
export function managedObject(
  object: { apiVersion: string; kind: string; metadata?: { name?: string; namespace?: string; labels?: Record<string, string> } },
  region: string,
): ManagedObject | undefined {
  const labels = object.metadata?.labels;
  const resource = resourceOfLabels(labels);
  if (!resource || !isManagedBy(labels, region)) return undefined;
  const { apiVersion, kind } = object;
  const key = resourceKey(resource.type, resource.id);
  return { ...resource, key, apiVersion, kind, namespace: object.metadata?.namespace ?? "", name: object.metadata?.name ?? "" };
}

/** The resourceVersion of each object an apply wrote, by describeObject() name. */
export type AppliedVersions = Map<string, string>;

/** An object as last observed: its resourceVersion, and the digest of applied content it holds (held.ts), if known. */
export interface LiveObject {
  resourceVersion: string;
  held: string | undefined;
  /** A Deployment only: whether its pod template references a secret env Secret (carries the checksum annotation). */
  referencesSecretEnv?: boolean;
}

/**
 * The live objects of a resource of the watched kinds (APPLIED_KINDS), by describeObject() name,
 * once every kind was listed: an object of those kinds missing from it is not the resource's.
 */
export type LiveObjects = Map<string, LiveObject>;

export interface Target {
  /**
   * The cluster's access, for a target that applies to a cluster: the agent then also watches
   * the cluster (observer) and corrects drift. Absent for a target with nothing to watch.
   */
  readonly kubeClient?: KubeClient;
  /**
   * Makes the target hold exactly the objects `buildManifests(resource)` describes: ensures the
   * Namespace, applies the objects (labels and desired-version annotation included) and removes
   * objects the resource no longer has (its Service once the port is 0). A target that can tell
   * returns the resourceVersions the objects have after the apply (Namespaces excepted).
   *
   * `live`, the resource's objects as last observed, lets a target skip an object that was seen
   * to hold exactly what it would apply (its held digest is the manifest's, see held.ts); such an
   * object is returned with its live version. Without `live`, every object is applied.
   *
   * A Secret built without its values (secretEnvData() without open: they left the table once applied)
   * is never written: it is checked against the live Secret, and one that does not hold them
   * throws SecretValuesNeeded. A target that writes no values (render) writes its keys.
   */
  // biome-ignore lint/suspicious/noConfusingVoidType: targets that keep no versions return nothing
  apply(resource: DesiredResource, live?: LiveObjects): Promise<AppliedVersions | void>;
  /**
   * Removes every object the tombstone's resource owns (never its Namespace). Objects already
   * gone count as removed; objects without this region's managed labels are left alone.
   */
  delete(tombstone: ResourceTombstone): Promise<void>;
  /** All objects managed in this region, except Namespaces (which are never pruned). */
  listManaged(): Promise<ManagedObject[]>;
}

/**
 * Why a call was refused rather than failed: `ownership`, an existing object is not the agent's
 * (re-checked at the ownership recheck interval, it clears once the object is removed or marked
 * for adoption); `namespace`, the resource's namespace is not allowed in this region (permanent).
 */
export type Refusal = "ownership" | "namespace";

/**
 * A failed target call, with what the work queue needs to choose the retry: the HTTP status
 * (undefined for network errors), the server's Retry-After, and whether it was a refusal.
 */
export class TargetError extends Error {
  readonly statusCode: number | undefined;
  readonly retryAfterMs: number | undefined;
  readonly refusal: Refusal | undefined;

  constructor(message: string, statusCode?: number, retryAfterMs?: number, refusal?: Refusal) {
    super(message);
    this.name = "TargetError";
    this.statusCode = statusCode;
    this.retryAfterMs = retryAfterMs;
    this.refusal = refusal;
  }

  /** Invalid requests (400 Bad Request, 415, 422 Invalid) and refused namespaces fail the same way every time. */
  get permanent(): boolean {
    return this.statusCode === 400 || this.statusCode === 415 || this.statusCode === 422 || this.refusal === "namespace";
  }
}

/**
 * apply() met a Secret built without its values (they leave the agent's memory once applied,
 * see sealed-secrets.ts) that the live Secret does not hold (deleted or edited): the caller
 * gives the resource its values again (GetSecretEnvSeals) and applies it once more. Objects
 * before the Secret in the apply's order may have been written already, as after any failure.
 */
export class SecretValuesNeeded extends TargetError {
  constructor(message: string) {
    super(message);
    this.name = "SecretValuesNeeded";
  }
}
