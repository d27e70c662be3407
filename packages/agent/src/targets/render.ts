// The render target (dry run / GitOps): writes exactly the objects the kubernetes target would
// apply, one deterministic YAML file per object, at <dir>/<namespace>/<kind>-<name>.yaml (a
// Namespace lives in its own directory). A Secret of secret env values is written with
// placeholders in place of the values (stringData, annotated so): no value ever reaches the
// disk, and a GitOps pipeline supplies them its own way. Files are staged in <dir>/.staging and renamed into
// place, so a reader listing the tree never sees a partial or temporary file.
//
// Files are written, read and renamed with synchronous calls, with one event-loop turn per
// resource (and per file read) so that timers and I/O (the ctrl stream, reports) run in
// between: each call blocks for one small file, well under a millisecond on a local disk. The
// promise API allocated a FileHandle, request objects and promises per file and kept each
// resource (decoded, and its rendered YAML) alive across several thread-pool round trips.
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { readdir } from "node:fs/promises";
import { setImmediate } from "node:timers/promises";
import { dirname, join, relative, sep } from "node:path";
import { parse, stringify } from "yaml";
import type { DesiredResource, ResourceTombstone } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { buildManifests, isManagedBy, ownedRefs, refOf, secretEnvData, type KubeObject, type ObjectRef } from "../manifests.ts";
import { managedObject, type ManagedObject, type Target } from "../target.ts";

/** Says, on the rendered Secret, that its values are placeholders. */
export const PLACEHOLDERS_ANNOTATION = "flotilla.dev/values";

/** A Secret with each value replaced by a placeholder naming its key. */
function withPlaceholders(secret: KubeObject): KubeObject {
  const keys = secretEnvData(secret)?.keys ?? [];
  const stringData = Object.fromEntries(keys.map((key) => [key, `<secret value of ${key}: not rendered>`]));
  const annotations = { ...secret.metadata.annotations, [PLACEHOLDERS_ANNOTATION]: "placeholders: the render target never writes a secret value" };
  return { ...secret, metadata: { ...secret.metadata, annotations }, stringData };
}

/** Path of an object's file, relative to the render directory. */
export function manifestPath(ref: ObjectRef): string {
  return join(ref.namespace ?? ref.name, `${ref.kind.toLowerCase()}-${ref.name}.yaml`);
}

const STAGING_DIR = ".staging";

/** Staged files of this process so far: their names are unique, so concurrent writes never share one. */
let stagedFiles = 0;

/** Sorted keys and no aliases, so the same object always renders to the same plain bytes. */
export function renderYaml(object: KubeObject): string {
  return stringify(object, { sortMapEntries: true, aliasDuplicateObjects: false });
}

export interface RenderTargetOptions {
  dir: string;
  region: string;
}

export class RenderTarget implements Target {
  readonly #dir: string;
  readonly #region: string;
  /**
   * Namespaces whose file this process wrote. Every resource of a namespace renders the same
   * Namespace file, so it is written once rather than once per resource.
   */
  readonly #writtenNamespaces = new Set<string>();

  constructor({ dir, region }: RenderTargetOptions) {
    this.#dir = dir;
    this.#region = region;
  }

  async apply(resource: DesiredResource): Promise<void> {
    await setImmediate();
    const { apply, absent } = buildManifests(resource, this.#region);
    for (const object of apply) {
      if (object.kind === "Secret") this.#write(withPlaceholders(object));
      else if (object.kind !== "Namespace") this.#write(object);
      else if (!this.#writtenNamespaces.has(object.metadata.name)) {
        this.#write(object);
        this.#writtenNamespaces.add(object.metadata.name);
      }
    }
    for (const ref of absent) this.#remove(ref);
  }

  async delete(tombstone: ResourceTombstone): Promise<void> {
    await setImmediate();
    for (const ref of ownedRefs(tombstone.type, tombstone.namespace, tombstone.name)) this.#remove(ref);
  }

  async listManaged(): Promise<ManagedObject[]> {
    const managed: ManagedObject[] = [];
    for (const path of await this.#files()) {
      await setImmediate();
      const object = this.#read(path);
      const managedOne = object && object.kind !== "Namespace" ? managedObject(object, this.#region) : undefined;
      if (managedOne) managed.push(managedOne);
    }
    return managed;
  }

  /** Stages the object's file, then renames it into place (a reader, or a crash, never sees half a file). */
  #write(object: KubeObject): void {
    const path = join(this.#dir, manifestPath(refOf(object)));
    const staged = join(this.#dir, STAGING_DIR, `${process.pid}-${++stagedFiles}.tmp`);
    // Directories are made only when a write finds one missing, not before every write.
    inDirectory(dirname(staged), () => writeFileSync(staged, renderYaml(object)));
    try {
      inDirectory(dirname(path), () => renameSync(staged, path));
    } catch (error) {
      rmSync(staged, { force: true });
      throw error;
    }
  }

  /** Removes the object's file if it holds an object managed in this region. */
  #remove(ref: ObjectRef): void {
    const path = manifestPath(ref);
    const object = this.#read(path);
    if (object && isManagedBy(object.metadata.labels, this.#region)) rmSync(join(this.#dir, path), { force: true });
  }

  #read(path: string): KubeObject | undefined {
    let text: string;
    try {
      text = readFileSync(join(this.#dir, path), "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw error;
    }
    const object: unknown = parse(text);
    return object && typeof object === "object" && "metadata" in object ? (object as KubeObject) : undefined;
  }

  /** Paths of the YAML files under the directory, relative to it. */
  async #files(): Promise<string[]> {
    let entries;
    try {
      entries = await readdir(this.#dir, { recursive: true, withFileTypes: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
      throw error;
    }
    return entries
      .filter((entry) => entry.isFile() && entry.name.endsWith(".yaml"))
      .map((entry) => relative(this.#dir, join(entry.parentPath, entry.name)))
      .filter((path) => !path.startsWith(STAGING_DIR + sep))
      .sort();
  }
}

/** Runs `op`; if it failed because `directory` is missing, creates it and runs `op` once more. */
function inDirectory(directory: string, op: () => void): void {
  try {
    op();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    mkdirSync(directory, { recursive: true });
    op();
  }
}
