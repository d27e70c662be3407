// Starts bench/ctrl-child.ts as a separate Node process and talks to it over IPC.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { CtrlOptions, StreamOptions } from "@flotilla/ctrl";
import { CTRL_ENVIRONMENT, CTRL_NODE_FLAGS } from "@flotilla/ctrl/node-flags";
import { IpcChild, type ChildMemory } from "./ipc.ts";
import { clockOffset } from "./util.ts";

export type { ChildMemory } from "./ipc.ts";

export const ADMIN_TOKEN = "bench-admin-token";

export interface ChildConfig {
  databaseUrl: string;
  adminToken: string;
  pollIntervalMs: number;
  stream?: Partial<StreamOptions>;
  streamSendTimeoutMs?: number;
  /** Serve TLS with these files (the B1/B2 TLS variants). */
  tls?: { certFile: string; keyFile: string };
  /** ctrl's --secrets-key-file (secret env values sealed under it; the region's agent gets them opened). */
  secretsKeyFile?: string;
  /** ctrl's --memory-release-growth-bytes (0: no release of its own); ctrl's default when absent. */
  memoryReleaseGrowthBytes?: number;
  /** ctrl's --notifier-* options (B15: its receivers are on loopback, so allowPrivate). */
  notifications?: CtrlOptions["notifications"];
  /** Single sign-on: ctrl verifies this issuer's ID tokens. */
  sso?: CtrlOptions["sso"];
}

export interface WriteSpec {
  id: string;
  namespace: string;
  image: string;
  region: string;
  replicas: number;
}

/** Many updates through the ctrl process's own Store, as fast as `writers` concurrent writers go (B6). */
export interface BurstSpec {
  /** The deployments to update (each must exist); writer w owns every writers-th of them. */
  targets: { id: string; namespace: string; replicas: number }[];
  region: string;
  /** Updates per deployment; update u sets the image to `${imagePrefix}${u}`. */
  rounds: number;
  imagePrefix: string;
  writers: number;
  /**
   * "store": each update is one store.deployments.update (one transaction each; on a disk
   * with a real fsync per commit this is ~100/s, serialized by the region's row lock).
   * "bulk": the same rows store.deployments.update writes (deployments, desired_resources,
   * one deployment_changes row each, regions.head_version), `perTransaction` updates per
   * transaction straight through SQL, each commit waking ctrl's poller as a Store commit does.
   */
  mode: "store" | "bulk";
  perTransaction?: number;
}

/** Times on the child's clock (CtrlProcess.burst maps them to the parent's). */
export interface BurstResult {
  writes: number;
  /** Before the first write started. */
  started: number;
  /** The first write's commit. */
  firstCommit: number;
  /** The last write's commit. */
  lastCommit: number;
  transactions: number;
}

export type ChildRequest =
  | { id: number; op: "ping" | "metrics" | "cpu" | "shutdown" }
  | { id: number; op: "memory"; reduce?: boolean }
  | { id: number; op: "update" | "create"; write: WriteSpec }
  | { id: number; op: "lastCommit"; regionId: number }
  | { id: number; op: "burst"; burst: BurstSpec };

export interface ChildMetrics {
  pollerQueries: number;
  watchStreams: number;
  watchEvents: number;
  watchBookmarks: number;
  watchEndedForLag: number;
  /** Streams and connections ended by a bound, by reason. */
  boundsEnforced: Record<string, number>;
  /** Memory releases ctrl ran itself (--memory-release-growth-bytes). */
  memoryReleases: number;
}

type Omit1<T> = T extends unknown ? Omit<T, "id"> : never;

export class CtrlProcess {
  readonly url: string;
  readonly pid: number;
  /** Add to a child timestamp to get this process's clock (estimated by ping). */
  clockOffset = 0;
  readonly #ipc: IpcChild;

  private constructor(ipc: IpcChild, url: string, pid: number) {
    this.#ipc = ipc;
    this.url = url;
    this.pid = pid;
  }

  /**
   * `bundle`: a directory built by buildBundle("ctrl", …, ["ctrl-child.ts"]); the child then runs
   * from it as the image runs ctrl (JavaScript, --enable-source-maps), not from the sources.
   */
  static async start(config: Omit<ChildConfig, "adminToken">, options: { cpuProfileDir?: string; bundle?: string } = {}): Promise<CtrlProcess> {
    // The Node flags and environment ctrl ships with (its heap and malloc settings), as the image and `pnpm ctrl` run it.
    // FLOTILLA_BENCH_CTRL_NODE_FLAGS: flags after those (V8 takes the last of a flag given twice),
    // to measure other settings against the shipped ones.
    const extra = process.env.FLOTILLA_BENCH_CTRL_NODE_FLAGS?.split(/\s+/).filter(Boolean) ?? [];
    const execArgv = ["--expose-gc", ...CTRL_NODE_FLAGS, ...extra];
    if (options.cpuProfileDir) execArgv.push("--cpu-prof", `--cpu-prof-dir=${options.cpuProfileDir}`);
    if (options.bundle) execArgv.push("--enable-source-maps");
    const script = options.bundle ? pathToFileURL(join(options.bundle, "ctrl-child.mjs")) : new URL("../ctrl-child.ts", import.meta.url);
    const { ipc, ready } = await IpcChild.fork<{ url: string; pid: number }>("ctrl child", script, execArgv, {
      ...CTRL_ENVIRONMENT,
      FLOTILLA_BENCH_CHILD: JSON.stringify({ ...config, adminToken: ADMIN_TOKEN }),
    });
    const ctrl = new CtrlProcess(ipc, ready.url, ready.pid);
    await ctrl.calibrateClock();
    return ctrl;
  }

  request<T>(req: Omit1<ChildRequest>): Promise<T> {
    return this.#ipc.request(req);
  }

  metrics(): Promise<ChildMetrics> {
    return this.request({ op: "metrics" });
  }

  /**
   * Memory after forced full GCs. `reduce`: memory-reducing ones, as V8 runs under memory
   * pressure; they also return the heap pages V8 keeps pooled for reuse after a GC freed
   * them (a plain forced GC keeps them, and they count in RSS).
   */
  memory(options: { reduce?: boolean } = {}): Promise<ChildMemory> {
    return this.request({ op: "memory", reduce: options.reduce });
  }

  /** Starts measuring the peak RSS again from now: VmHWM reset to the current RSS. */
  resetPeakRss(): void {
    writeFileSync(`/proc/${this.pid}/clear_refs`, "5");
  }

  /** The highest RSS since start or since resetPeakRss() (VmHWM). */
  peakRss(): number {
    return Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${this.pid}/status`, "utf8"))![1]) * 1024;
  }

  cpu(): Promise<NodeJS.CpuUsage> {
    return this.request({ op: "cpu" });
  }

  /** A write through the ctrl process's own Store; returns the commit time on this process's clock. */
  async write(op: "update" | "create", write: WriteSpec): Promise<number> {
    const { t } = await this.request<{ t: number }>({ op, write });
    return t + this.clockOffset;
  }

  /**
   * When ctrl's process last committed a change to region `regionId` (a write an API call made,
   * say), on this process's clock; undefined if it has not.
   */
  async lastCommit(regionId: number): Promise<number | undefined> {
    const { t } = await this.request<{ t?: number }>({ op: "lastCommit", regionId });
    return t === undefined ? undefined : t + this.clockOffset;
  }

  /** Runs a burst of updates in the ctrl process; the returned times are on this process's clock. */
  async burst(spec: BurstSpec): Promise<BurstResult> {
    const r = await this.request<BurstResult>({ op: "burst", burst: spec });
    return { ...r, started: r.started + this.clockOffset, firstCommit: r.firstCommit + this.clockOffset, lastCommit: r.lastCommit + this.clockOffset };
  }

  /** Both processes read the same system clock; this removes what is left (NTP-style, min RTT). */
  async calibrateClock(samples = 30): Promise<void> {
    this.clockOffset = (await clockOffset(async () => (await this.request<{ t: number }>({ op: "ping" })).t, samples)).offset;
  }

  stop(): Promise<void> {
    return this.#ipc.stop();
  }
}
