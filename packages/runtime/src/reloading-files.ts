// Files that are loaded again when their contents change: certificates and keys that are
// rotated on disk (cert-manager, kubelet-projected secrets) while the process runs.
import { readFileSync } from "node:fs";

export interface ReloadingFilesOptions<T> {
  /** The files, read in this order and handed to `load` as their contents. */
  paths: readonly string[];
  /** Builds the value from the files' contents; throws if they do not load (e.g. a key not matching its certificate). */
  load(contents: Buffer[]): T;
  /** A changed set of files loaded; `current()` now returns the new value. */
  onReloaded(paths: readonly string[]): void;
  /** A changed set of files did not load; the previous value stays until the contents change again. */
  onRejected(paths: readonly string[], error: unknown): void;
  /** The files are read again at most this often (ms); in between, current() returns the loaded value. Default 0: every call. */
  recheckMs?: number;
}

/**
 * The value loaded from a set of files, kept in step with them. `current()` reads the files
 * (a few KB) and compares their contents with what was loaded last, so a rotation is seen
 * however the files were replaced (rename, symlink swap, in-place write, same mtime). Semantics:
 * - unchanged contents: the loaded value, without calling `load`;
 * - a file missing or unreadable (mid-rotation): the loaded value; the next call looks again;
 * - changed contents that load: the new value from now on (`onReloaded` once);
 * - changed contents that do not load: the previous value, `onRejected` once for those contents.
 * The constructor loads the files once and throws if they do not load: a start fails loudly.
 * With `recheckMs`, the files are read at most that often: a process making thousands of
 * requests a second reads them once a second, not before every request.
 */
export class ReloadingFiles<T> {
  readonly #options: ReloadingFilesOptions<T>;
  #loaded: Buffer[];
  #rejected: Buffer[] | undefined;
  #value: T;
  #checkedAt: number;

  constructor(options: ReloadingFilesOptions<T>) {
    this.#options = options;
    this.#loaded = readAll(options.paths);
    this.#value = options.load(this.#loaded);
    this.#checkedAt = performance.now();
  }

  current(): T {
    const now = performance.now();
    if (now - this.#checkedAt < (this.#options.recheckMs ?? 0)) return this.#value;
    this.#checkedAt = now;
    let contents: Buffer[];
    try {
      contents = readAll(this.#options.paths);
    } catch {
      return this.#value;
    }
    if (sameContents(contents, this.#loaded) || (this.#rejected && sameContents(contents, this.#rejected))) return this.#value;
    try {
      this.#value = this.#options.load(contents);
      this.#loaded = contents;
      this.#rejected = undefined;
      this.#options.onReloaded(this.#options.paths);
    } catch (error) {
      this.#rejected = contents;
      this.#options.onRejected(this.#options.paths, error);
    }
    return this.#value;
  }
}

function readAll(paths: readonly string[]): Buffer[] {
  return paths.map((path) => readFileSync(path));
}

function sameContents(a: Buffer[], b: Buffer[]): boolean {
  return a.length === b.length && a.every((contents, i) => contents.equals(b[i]!));
}
