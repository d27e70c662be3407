// Starts bench/emulator-child.ts, the Kubernetes emulator in a process of its own (B6, B7), and
// talks to it over IPC: its CPU and memory stay out of the agent's process and the benchmark's.
import { writeFile } from "node:fs/promises";
import { kubeconfigYaml, type KubeObject, type RequestLogEntry } from "@flotilla/k8s-emulator";
import { IpcChild, type ChildMemory } from "./ipc.ts";

export interface EmulatorChildConfig {
  /** Request log entries kept (the emulator's default: 10,000). */
  requestLogLimit?: number;
}

/** What the agent of `region` would have applied for every desired resource, as its first run leaves it (B7). */
export interface SeedSpec {
  databaseUrl: string;
  region: string;
  /** The key file the region's secret env values are sealed under: the Secrets the agent applies hold them opened. */
  secretsKeyFile?: string;
}

export interface SeedResult {
  resources: number;
  namespaces: number;
  /** Objects applied, by kind. */
  applied: Record<string, number>;
  /** Deployments whose rollout the emulator's controller completed (all of them). */
  rolledOut: number;
  ms: number;
}

/** The emulator's store: its resourceVersion (moves with every write) and object counts by kind. */
export interface EmulatorState {
  resourceVersion: string;
  objects: Record<string, number>;
}

export type ObjectRef = [apiVersion: string, kind: string, namespace: string, name: string];

/** A Deployment as a benchmark waits for it: applied by the agent (it carries a desired version), at `version` and `image` if given. */
export interface DeploymentWant {
  namespace: string;
  name: string;
  version?: number;
  image?: string;
}

export type EmulatorRequest =
  | { id: number; op: "state" | "clearRequests" | "requestCounts" | "shutdown" }
  | { id: number; op: "memory"; reduce?: boolean }
  | { id: number; op: "requests"; from: number }
  | { id: number; op: "get"; refs: ObjectRef[] }
  | { id: number; op: "converge"; want: DeploymentWant[]; timeoutMs: number }
  | { id: number; op: "seed"; seed: SeedSpec };

export interface EmulatorReady {
  url: string;
  rolloutDelayMs: number;
}

export class EmulatorProcess {
  readonly url: string;
  readonly rolloutDelayMs: number;
  readonly #ipc: IpcChild;

  private constructor(ipc: IpcChild, ready: EmulatorReady) {
    this.#ipc = ipc;
    this.url = ready.url;
    this.rolloutDelayMs = ready.rolloutDelayMs;
  }

  static async start(config: EmulatorChildConfig = {}): Promise<EmulatorProcess> {
    // 200,000 objects with their managedFields take a few GB of heap.
    const { ipc, ready } = await IpcChild.fork<EmulatorReady>(
      "emulator child",
      new URL("../emulator-child.ts", import.meta.url),
      ["--expose-gc", "--max-old-space-size=8192"],
      {
        FLOTILLA_BENCH_EMULATOR: JSON.stringify(config),
      },
    );
    return new EmulatorProcess(ipc, ready);
  }

  writeKubeconfig(path: string): Promise<void> {
    return writeFile(path, kubeconfigYaml(this.url), { mode: 0o600 });
  }

  seed(seed: SeedSpec): Promise<SeedResult> {
    return this.#ipc.request({ op: "seed", seed });
  }

  state(): Promise<EmulatorState> {
    return this.#ipc.request({ op: "state" });
  }

  /** The request log from entry `from` on (entries are numbered from the last clear). */
  requests(from = 0): Promise<RequestLogEntry[]> {
    return this.#ipc.request({ op: "requests", from });
  }

  /** The request log counted by "verb resource status" (e.g. "apply deployments 200"). */
  requestCounts(): Promise<Record<string, number>> {
    return this.#ipc.request({ op: "requestCounts" });
  }

  clearRequests(): Promise<void> {
    return this.#ipc.request({ op: "clearRequests" });
  }

  /** The objects at `refs` (undefined where none is). */
  get(refs: ObjectRef[]): Promise<(KubeObject | undefined)[]> {
    return this.#ipc.request({ op: "get", refs });
  }

  /**
   * Resolves, with the time (`now()`, comparable across processes), once every Deployment is as
   * wanted; rejects after `timeoutMs`. Checked in the emulator's process, so waiting costs the
   * agent's process nothing.
   */
  async converge(want: DeploymentWant[], timeoutMs: number): Promise<number> {
    return (await this.#ipc.request<{ at: number }>({ op: "converge", want, timeoutMs })).at;
  }

  memory(reduce = false): Promise<ChildMemory> {
    return this.#ipc.request({ op: "memory", reduce });
  }

  stop(): Promise<void> {
    return this.#ipc.stop();
  }
}
