// How the benchmark talks to its child processes (ctrl, the Kubernetes emulator) over Node's IPC
// channel: numbered requests, one reply each; the child announces itself with reply 0.
import { readFileSync } from "node:fs";
import { fork, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";

export type IpcReply = { id: number; result?: unknown; error?: string };

/** The parent's end: forks the child and sends it requests. */
export class IpcChild {
  readonly #child: ChildProcess;
  readonly #pending = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>();
  #next = 1;

  private constructor(child: ChildProcess, what: string) {
    this.#child = child;
    child.on("message", (reply: IpcReply) => {
      const p = this.#pending.get(reply.id);
      if (!p) return;
      this.#pending.delete(reply.id);
      if (reply.error !== undefined) p.reject(new Error(`${what}: ${reply.error}`));
      else p.resolve(reply.result);
    });
    child.on("exit", (code) => {
      for (const p of this.#pending.values()) p.reject(new Error(`${what} exited (${code})`));
      this.#pending.clear();
    });
  }

  /** Forks `script` (its config in the environment) and resolves with what it announced once ready. */
  static async fork<Ready>(what: string, script: URL, execArgv: string[], env: Record<string, string>): Promise<{ ipc: IpcChild; ready: Ready }> {
    const child = fork(fileURLToPath(script), [], {
      execArgv: ["--disable-warning=ExperimentalWarning", ...execArgv],
      env: { ...process.env, ...env },
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    const ready = await new Promise<Ready>((resolve, reject) => {
      const onExit = (code: number | null) => reject(new Error(`${what} exited (${code}) before it was ready`));
      child.once("exit", onExit);
      child.once("message", (reply: IpcReply) => {
        child.off("exit", onExit);
        if (reply.error) reject(new Error(reply.error));
        else resolve(reply.result as Ready);
      });
    });
    return { ipc: new IpcChild(child, what), ready };
  }

  request<T>(req: { op: string; [field: string]: unknown }): Promise<T> {
    const id = this.#next++;
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.#child.send({ ...req, id });
    });
  }

  /** Asks the child to shut down and waits for it to exit (killed after 5 s). */
  async stop(): Promise<void> {
    if (this.#child.exitCode !== null) return;
    const exited = new Promise<void>((resolve) => this.#child.once("exit", () => resolve()));
    await this.request({ op: "shutdown" }).catch(() => undefined);
    const timer = setTimeout(() => this.#child.kill("SIGKILL"), 5000);
    await exited;
    clearTimeout(timer);
  }
}

/** The child's end: answers every request with `handle`'s result (or its error), then announces `ready`. */
export function serveParent<Request extends { id: number }>(handle: (req: Request) => Promise<unknown>, ready: unknown): void {
  const send = (reply: IpcReply) => process.send!(reply);
  process.on("message", (req: Request) => {
    handle(req).then(
      (result) => send({ id: req.id, result }),
      (error: unknown) => send({ id: req.id, error: error instanceof Error ? (error.stack ?? error.message) : String(error) }),
    );
  });
  process.on("disconnect", () => process.exit(0));
  send({ id: 0, result: ready });
}

export interface ChildMemory {
  heapUsed: number;
  heapTotal: number;
  rss: number;
  external: number;
  arrayBuffers: number;
  /** The parts of the RSS (Linux's /proc/self/status): anonymous memory, and pages of mapped files (Node's binary, libraries). */
  rssAnon: number;
  rssFile: number;
}

/** The parts of this process's RSS (Linux's /proc/self/status): anonymous memory, and pages of mapped files. */
function rssParts(): { rssAnon: number; rssFile: number } {
  const status = readFileSync("/proc/self/status", "utf8");
  const kB = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? Number.NaN) * 1024;
  return { rssAnon: kB("RssAnon"), rssFile: kB("RssFile") };
}

type Gc = (options?: { type: "major"; execution: "sync"; flavor: "last-resort" }) => void;

/**
 * The child's memory after forced full GCs (it must run with --expose-gc). `reduce`: V8's
 * memory-reducing ones, as under memory pressure, which also return the heap pages V8 keeps
 * pooled after a GC freed them.
 */
export async function memoryAfterGc(reduce = false): Promise<ChildMemory> {
  const gc = (globalThis as { gc?: Gc }).gc;
  if (!gc) throw new Error("start the child with --expose-gc");
  // Several passes: weak references and finalizers free more on later ones.
  for (let i = 0; i < 4; i++) {
    if (reduce) gc({ type: "major", execution: "sync", flavor: "last-resort" });
    else gc();
    await new Promise((r) => setImmediate(r));
  }
  return memoryNow();
}

/** This process's memory as it holds it now, without forcing a GC. */
export function memoryNow(): ChildMemory {
  const m = process.memoryUsage();
  return {
    heapUsed: m.heapUsed,
    heapTotal: m.heapTotal,
    rss: m.rss,
    external: m.external,
    arrayBuffers: m.arrayBuffers,
    ...rssParts(),
  };
}
