// One kind's rules in one place, as the API server keeps them in each kind's
// pkg/registry/<group>/<kind>/strategy.go (with its defaulters from
// pkg/apis/<group>/v1/defaults.go and its printer from
// pkg/printers/internalversion/printers.go). The generic code (registry.ts,
// http.ts and http/, discovery.ts, openapi.ts, table.ts, selectors.ts,
// canonical.ts) serves every kind of kinds/index.ts through this interface and
// names none.
import type { Allocators } from "../defaults.ts";
import type { FieldError } from "../errors.ts";
import type { ResourceType } from "../resources.ts";
import type { Schema } from "../schema.ts";
import type { FieldGetter } from "../selectors.ts";
import type { ObjectStore } from "../store.ts";
import type { Printer } from "../table.ts";
import type { JsonObject, KubeObject } from "../util.ts";

/** Subresources besides `status` and `scale`: authentication.k8s.io/v1 TokenRequest. */
export type ExtraSubresource = "token";

/** A kind's scale subresource: the object as an autoscaling/v1 Scale, and the object with a Scale's replicas. */
export interface ScaleRules {
  toScale(o: KubeObject): JsonObject;
  scaled(o: KubeObject, replicas: number): KubeObject;
}

/** What a kind's own storage rules reach: the stored objects, and the removal of a namespace's content. */
export interface KindStorage {
  readonly store: ObjectStore;
  /** Removes every object in the namespace, kind by kind. */
  removeContent(namespace: string): void;
}

/**
 * A served kind: its descriptor (ResourceType: names, scope, the generic registry's switches)
 * and the rules its strategy adds. Every rule is optional; a kind without one is stored as
 * given beyond the generic checks (metadata, resourceVersion, managedFields).
 */
export interface KindStrategy extends ResourceType {
  /** Subresources served beyond `status` (which `statusSubresource` turns on) and `scale`. */
  readonly extraSubresources?: readonly ExtraSubresource[];
  /** Serves the scale subresource (the storage's ScaleREST). */
  readonly scale?: ScaleRules;
  /** Discovery lists no `deletecollection` (the storage is no rest.CollectionDeleter). */
  readonly noCollectionDelete?: boolean;
  /**
   * OpenAPI definitions of a built-in kind that the shared ones (openapi-schemas.ts) lack: its
   * own under definitionName(group, version, kind), and nested types only it refers to.
   * Custom resources publish their `schema` instead.
   */
  readonly definitions?: Readonly<Record<string, Schema>>;
  /** A custom resource's openAPIV3Schema: objects are pruned and validated against it. */
  readonly schema?: Schema;
  /** Fields of Go map type besides the shared ones (canonical.ts): their keys are data. */
  readonly mapFields?: readonly string[];
  /**
   * Fills in defaults in place before validation, on writes of the main resource and on the
   * direct `put` (SetDefaults_* and what PrepareForCreate sets); `previous` is the stored object
   * on an update, so that allocated values carry over.
   */
  defaults?(o: KubeObject, previous: KubeObject | undefined, allocate: Allocators): void;
  /** Field errors beyond the generic metadata checks, for any write (strategy Validate). */
  validate?(o: KubeObject): FieldError[];
  /** Field errors of changes an update may not make, e.g. immutable fields (ValidateUpdate). */
  validateUpdate?(old: KubeObject, o: KubeObject): FieldError[];
  /**
   * The status an API write stores when it leaves none: the zero status struct PrepareForCreate
   * resets to, which Go encodes as `{}` whatever omitempty says.
   */
  readonly zeroStatus?: JsonObject;
  /** Table columns and cells for `kubectl get`; without one, NAME and AGE (rest/table.go). */
  readonly printer?: Printer;
  /** Field selector labels beyond metadata.name and metadata.namespace (GetAttrs, ToSelectableFields). */
  readonly fieldLabels?: Readonly<Record<string, FieldGetter>>;
  /**
   * The DELETE of one object, after the generic checks of its options and preconditions, for a
   * kind whose REST storage deletes in its own way; returns the response body.
   */
  delete?(object: KubeObject, dryRun: boolean, storage: KindStorage): KubeObject;
  /** Removes what an object takes along when it is removed directly, without the API's rules (the test API). */
  beforeRemove?(name: string, storage: KindStorage): void;
}

/** The subresources a type serves: `status` and `scale` when it has them, then its strategy's others. */
export function subresourcesOf(rt: KindStrategy): string[] {
  return [...(rt.statusSubresource ? ["status"] : []), ...(rt.scale ? ["scale"] : []), ...(rt.extraSubresources ?? [])];
}

/** The descriptor members a kind spells out; the others take the values most kinds have. */
type KindSpec = Pick<KindStrategy, "group" | "version" | "kind" | "resource" | "namespaced"> & Partial<KindStrategy>;

/**
 * A KindStrategy with the usual descriptor values filled in: singular and list kind from the
 * kind, no short names or categories, DNS-subdomain names, no status subresource, no
 * generation, unconditional updates allowed.
 */
export function defineKind(spec: KindSpec): KindStrategy {
  return {
    singular: spec.kind.toLowerCase(),
    listKind: `${spec.kind}List`,
    shortNames: [],
    categories: [],
    nameRule: "subdomain",
    statusSubresource: false,
    generation: "none",
    allowUnconditionalUpdate: true,
    ...spec,
  };
}
