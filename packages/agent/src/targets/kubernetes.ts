// The kubernetes target: server-side apply with the agent's field manager (forcing conflicts:
// the agent owns these fields) onto objects that carry its ownership marks only, deletes of its
// own objects with Background propagation, prune listing by labels.
// An object the observer saw holding exactly what would be applied (held.ts) is not applied again
// while it stays at that resourceVersion: a restart or a new version that leaves a Service as it
// was writes nothing to it.
import type { DesiredResource, ResourceTombstone } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import {
  buildManifests,
  describeObject as describe,
  FIELD_MANAGER,
  managedSelector,
  ownedRefs,
  secretEnvData,
  type KubeObject,
  type ObjectRef,
  type SecretEnvData,
} from "../manifests.ts";
import { containsCanonical } from "../compare.ts";
import { appliedForm, contentDigest } from "../held.ts";
import { secretRequestBody } from "../secret-request.ts";
import { typeName } from "../keys.ts";
import { KubeApiError, objectPath, resourcePath, statusCodeOf, type ApiObject, type KubeClient } from "../kube-api.ts";
import { isOwnedBy, ownershipConflict, type Owner } from "../ownership.ts";
import { managedObject, SecretValuesNeeded, TargetError, type AppliedVersions, type LiveObjects, type ManagedObject, type Target } from "../target.ts";

/** Kinds that listManaged() looks at (Namespaces are never pruned). */
const PRUNABLE_KINDS = [
  { apiVersion: "apps/v1", kind: "Deployment" },
  { apiVersion: "v1", kind: "Service" },
  { apiVersion: "cilium.io/v2", kind: "CiliumNetworkPolicy" },
  { apiVersion: "policy/v1", kind: "PodDisruptionBudget" },
  { apiVersion: "autoscaling/v2", kind: "HorizontalPodAutoscaler" },
];

const LIST_PAGE_SIZE = 500;

/** Read-check-write rounds of one object that may each lose a race (409) before the work queue retries. */
const WRITE_ATTEMPTS = 3;

export interface KubernetesTargetOptions {
  kubeClient: KubeClient;
  region: string;
}

export class KubernetesTarget implements Target {
  /** The cluster's access, also used by the agent's observer. */
  readonly kubeClient: KubeClient;
  readonly #region: string;
  /** Namespaces applied by this process; forgotten when an apply into one finds it missing. */
  readonly #ensuredNamespaces = new Set<string>();
  /**
   * Secrets (describeObject() names) this process applied while the live Deployment did not
   * reference them yet, until it is seen to or the Secret is deleted: see #knownAbsent().
   */
  readonly #appliedSecrets = new Set<string>();

  constructor({ kubeClient, region }: KubernetesTargetOptions) {
    this.kubeClient = kubeClient;
    this.#region = region;
  }

  async apply(resource: DesiredResource, live?: LiveObjects): Promise<AppliedVersions> {
    const { apply, absent } = buildManifests(resource, this.#region);
    const owner: Owner = { region: this.#region, type: typeName(resource.type), id: resource.id };
    const applied: AppliedVersions = new Map();
    // An autoscaler no longer wanted goes first: between the Deployment taking spec.replicas back
    // and the delete, it would scale the Deployment again.
    const secretReferenced = live?.get(describe({ kind: "Deployment", metadata: { namespace: resource.namespace, name: resource.id } }))?.referencesSecretEnv;
    const [retired, unwanted] = [absent.filter(ownsReplicas), absent.filter((ref) => !ownsReplicas(ref))].map((refs) =>
      refs.filter((ref) => !this.#knownAbsent(ref, live, secretReferenced)),
    );
    for (const ref of retired) await this.#deleteManaged(ref, owner);
    for (const object of apply) {
      if (object.kind === "Namespace") {
        await this.#ensureNamespace(object);
        continue;
      }
      const name = describe(object);
      const secretData = secretEnvData(object);
      // A Secret to write is noted before the write (a write that fails may still have created
      // it), unless the live Deployment already references it: the removal will see that.
      if (object.kind === "Secret") {
        if (secretReferenced) this.#appliedSecrets.delete(name);
        else if (secretData?.open) this.#appliedSecrets.add(name);
      }
      if (secretData && !secretData.open) {
        await this.#checkWithheld(object, secretData, owner);
        continue;
      }
      const current = live?.get(name);
      if (current?.held !== undefined && current.held === contentDigest(object)) {
        applied.set(name, current.resourceVersion);
        continue;
      }
      try {
        const written = await this.#applyOwned(object, owner, current?.resourceVersion);
        // The observer never sees a Secret (it is not watched): nothing to compare its version with.
        if (object.kind !== "Secret") applied.set(name, written?.metadata?.resourceVersion ?? "");
      } catch (error) {
        // The namespace was deleted, or is being deleted, behind our back: ensure it again on the retry.
        if (error instanceof TargetError && (error.statusCode === 404 || error.statusCode === 403)) this.#ensuredNamespaces.delete(resource.namespace);
        throw error;
      }
    }
    for (const ref of unwanted) await this.#deleteManaged(ref, owner);
    return applied;
  }

  async delete(tombstone: ResourceTombstone): Promise<void> {
    const owner: Owner = { region: this.#region, type: typeName(tombstone.type), id: tombstone.id };
    for (const ref of ownedRefs(tombstone.type, tombstone.namespace, tombstone.name)) await this.#deleteManaged(ref, owner);
  }

  async listManaged(): Promise<ManagedObject[]> {
    const managed: ManagedObject[] = [];
    for (const { apiVersion, kind } of PRUNABLE_KINDS) {
      let continueToken: string | undefined;
      do {
        let page;
        try {
          page = await this.kubeClient.list(
            resourcePath({ apiVersion, kind }),
            { labelSelector: managedSelector(this.#region), limit: LIST_PAGE_SIZE, continue: continueToken },
            (item) => {
              // List items of built-in types come without apiVersion and kind.
              const object = managedObject({ ...item, apiVersion, kind }, this.#region);
              if (object) managed.push(object);
            },
          );
        } catch (error) {
          // A cluster without the Cilium CRDs has no policies to prune.
          if (isNotFound(error)) break;
          throw targetError(error, `list ${kind}`);
        }
        continueToken = page.continue || undefined;
      } while (continueToken);
    }
    return managed;
  }

  /**
   * Writes `object` unless the object already at its place is not the agent's (then a refusal
   * naming the owner), and not at all when the live object already holds it (compared in
   * canonical form: a no-op apply would cost a request per object per refresh). `cachedVersion`,
   * the resourceVersion the observer last saw the object at, saves the read. The read and the
   * write race with other writers, so the write is made to fail rather than overwrite an object
   * that changed since the read, and is then retried from a new read:
   *
   * * existing (ours or marked for adoption): server-side apply, forced (the fields we apply are
   *   ours), carrying the read's resourceVersion: the API server answers 409 Conflict if the
   *   object was replaced or relabelled meanwhile.
   * * absent: server-side apply, not forced. Apply cannot say "create only" (a resourceVersion on
   *   a missing object does not stop the create), and a POST create would record our fields
   *   under an Update entry of our manager that later applies cannot remove (a dropped env var
   *   would stay forever). Not forced, an apply onto an object someone created since the read is
   *   a 409 field conflict wherever their values differ from ours (a Helm object's
   *   app.kubernetes.io/managed-by at least), so it is not taken over.
   */
  async #applyOwned(object: KubeObject, owner: Owner, cachedVersion: string | undefined): Promise<ApiObject | undefined> {
    const wanted = appliedForm(object);
    const secretData = secretEnvData(object);
    const holds = (current: ApiObject) =>
      containsCanonical(current, wanted) && (!secretData || secretData.heldBy((current as { data?: Record<string, unknown> }).data));
    for (let attempt = 1; ; attempt++) {
      // The observer's cache holds only objects labelled as this resource's in this region: at
      // that resourceVersion the object was ours, and the precondition makes the apply fail if it
      // is not that version any more. Otherwise, and after such a failure, read it.
      const current = attempt === 1 && cachedVersion ? undefined : await this.#read(object);
      const conflict = current && ownershipConflict(current, owner);
      if (conflict) throw new TargetError(conflict, 409, undefined, "ownership");
      if (current && holds(current)) return current;
      const resourceVersion = current ? current.metadata?.resourceVersion : attempt === 1 ? cachedVersion : undefined;
      const body = resourceVersion ? { ...object, metadata: { ...object.metadata, resourceVersion } } : object;
      const options = { fieldManager: FIELD_MANAGER, force: resourceVersion !== undefined };
      // A Secret's values go out as bytes the client zeroes (secret-request.ts), its answer unread.
      const bytes = secretData ? secretRequestBody(body) : undefined;
      try {
        if (!bytes) return await this.kubeClient.apply(objectPath(object), body, options);
        await this.kubeClient.applyBytes(objectPath(object), bytes, options);
        return undefined;
      } catch (error) {
        if (isConflict(error) && attempt < WRITE_ATTEMPTS) continue;
        throw targetError(error, `apply ${describe(object)}`);
      }
    }
  }

  /**
   * A Secret whose values the resource no longer carries (secretEnvData() without open) must already be
   * there as ours, holding them and the rest of the manifest; otherwise the values are needed
   * (SecretValuesNeeded). Writes nothing.
   */
  async #checkWithheld(object: KubeObject, withheld: SecretEnvData, owner: Owner): Promise<void> {
    const current = await this.#read(object);
    const conflict = current && ownershipConflict(current, owner);
    if (conflict) throw new TargetError(conflict, 409, undefined, "ownership");
    if (current && containsCanonical(current, appliedForm(object)) && withheld.heldBy((current as { data?: Record<string, unknown> }).data)) return;
    throw new SecretValuesNeeded(`${describe(object)} ${current ? "does not hold" : "is missing"} the secret env values applied before`);
  }

  /**
   * Makes sure the namespace exists, without writing to one that does: an existing namespace may
   * belong to anyone (kube-system, another team), so only a namespace the agent creates carries
   * its marks, and the agent never changes or deletes any namespace (docs/ownership-and-status.md says why).
   */
  async #ensureNamespace(object: KubeObject): Promise<void> {
    const name = object.metadata.name;
    if (this.#ensuredNamespaces.has(name)) return;
    let current = await this.#read(object);
    if (!current) {
      try {
        current = await this.kubeClient.create(resourcePath({ apiVersion: object.apiVersion, kind: object.kind }), object, { fieldManager: FIELD_MANAGER });
      } catch (error) {
        if (!isConflict(error)) throw targetError(error, `create namespace ${name}`);
        current = await this.#read(object);
      }
    }
    // A namespace being deleted refuses new objects (403 NamespaceTerminating): wait until it is
    // gone, then create it anew. The work queue's backoff spaces the retries.
    if (current?.metadata?.deletionTimestamp || (current as { status?: { phase?: string } } | undefined)?.status?.phase === "Terminating") {
      throw new TargetError(`namespace ${name} is being terminated; waiting for it to be gone to create it again`, 403);
    }
    this.#ensuredNamespaces.add(name);
  }

  /** The live object, or undefined if it does not exist (or its kind is unknown to the cluster). */
  async #read(ref: { apiVersion: string; kind: string; metadata: { name: string; namespace?: string } }): Promise<ApiObject | undefined> {
    try {
      return await this.kubeClient.get(objectPath(ref));
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw targetError(error, `read ${describe(ref)}`);
    }
  }

  /**
   * Whether `ref`, an object the resource must not have, is known not to be there as ours, so
   * its delete (which reads it first) is skipped: without that, every apply read each object a
   * deployment does not use (a Service at port 0, a budget, an autoscaler, a Secret). Known only
   * with `live` (every watched kind listed; a re-apply passes none and reads them all):
   *
   * * a watched kind: the object is not among the resource's live objects. Had it been created
   *   since the cache last heard, its watch event makes drift correction run the resource again.
   * * a Secret (not watched): the live Deployment's pod template references no secret env
   *   (`secretReferenced` false), and this process did not apply the Secret while the cache
   *   lagged behind (#appliedSecrets). One left behind by a crash between the Deployment's write
   *   and the Secret's delete goes with the periodic refresh, which passes no live objects.
   */
  #knownAbsent(ref: ObjectRef, live: LiveObjects | undefined, secretReferenced: boolean | undefined): boolean {
    if (!live) return false;
    const name = describe({ kind: ref.kind, metadata: ref });
    return ref.kind === "Secret" ? secretReferenced === false && !this.#appliedSecrets.has(name) : !live.has(name);
  }

  /**
   * Deletes the object only if its labels say it is `owner`'s in this region. The preconditions
   * (uid and resourceVersion of the read) make the delete fail (409) rather than remove an object
   * that was replaced or relabelled since; the retry reads it again.
   */
  async #deleteManaged(ref: ObjectRef, owner: Owner): Promise<void> {
    const header = { apiVersion: ref.apiVersion, kind: ref.kind, metadata: { name: ref.name, namespace: ref.namespace } };
    const live = await this.#read(header);
    if (live && isOwnedBy(live, owner)) {
      try {
        await this.kubeClient.delete(objectPath(header), {
          propagationPolicy: "Background",
          preconditions: { uid: live.metadata?.uid, resourceVersion: live.metadata?.resourceVersion },
        });
      } catch (error) {
        if (!isNotFound(error)) throw targetError(error, `delete ${describe(header)}`);
      }
    }
    // Not ours to delete, or gone: either way not a Secret this process applied any more.
    this.#appliedSecrets.delete(describe(header));
  }
}

/** An object that, while it exists, sets its Deployment's replicas. */
function ownsReplicas(ref: ObjectRef): boolean {
  return ref.kind === "HorizontalPodAutoscaler";
}

function isConflict(error: unknown): boolean {
  return statusCodeOf(error) === 409;
}

/** Not found; also a kind the cluster does not serve (no Cilium CRDs installed): its path is not found. */
function isNotFound(error: unknown): boolean {
  return statusCodeOf(error) === 404;
}

/** Carries the HTTP status, the server's message and Retry-After to the work queue. */
function targetError(error: unknown, what: string): TargetError {
  if (!(error instanceof KubeApiError)) return new TargetError(`${what}: ${error instanceof Error ? error.message : String(error)}`);
  return new TargetError(`${what}: ${error.statusMessage}`, error.statusCode, retryAfterMs(error.retryAfter));
}

/** Retry-After in seconds (what the API server sends) or as an HTTP date. */
function retryAfterMs(header: string | undefined): number | undefined {
  if (!header) return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}
