// Open streams of agent tokens: a revoked or expired token (or a deleted region, whose tokens
// go with it) must not keep a watch stream that was authorized before. Every interval, one
// query per 1,000 distinct tokens re-checks those with open streams; the streams of a token
// no longer valid are reset (the agent reconnects and is refused with UNAUTHENTICATED).
import { constants as h2 } from "node:http2";
import type { NodeServerRequest } from "./services/cluster/watch-deployment-changes.ts";
import { resetTransport } from "./services/cluster/watch-deployment-changes.ts";

export class AgentStreams {
  readonly #byToken = new Map<string, Set<NodeServerRequest>>();
  readonly #stillValid: (tokens: string[]) => Promise<Set<string>>;
  readonly #timer: NodeJS.Timeout;
  #checking = false;

  /** `intervalMs` bounds how long a stream outlives its token (--token-recheck-interval). */
  constructor(stillValid: (tokens: string[]) => Promise<Set<string>>, intervalMs: number) {
    this.#stillValid = stillValid;
    this.#timer = setInterval(() => void this.#check(), intervalMs);
    this.#timer.unref();
  }

  /** Open streams being watched. */
  get size(): number {
    let n = 0;
    for (const streams of this.#byToken.values()) n += streams.size;
    return n;
  }

  /** Watches a streaming call of `token` until `ended` (the call's signal) aborts. */
  add(token: string, req: NodeServerRequest | undefined, ended: AbortSignal): void {
    if (!req || ended.aborted) return;
    let streams = this.#byToken.get(token);
    if (!streams) this.#byToken.set(token, (streams = new Set()));
    streams.add(req);
    const owner = streams;
    ended.addEventListener(
      "abort",
      () => {
        owner.delete(req);
        if (owner.size === 0 && this.#byToken.get(token) === owner) this.#byToken.delete(token);
      },
      { once: true },
    );
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  async #check(): Promise<void> {
    if (this.#checking || this.#byToken.size === 0) return;
    this.#checking = true;
    try {
      const tokens = [...this.#byToken.keys()];
      const valid = await this.#stillValid(tokens);
      for (const token of tokens) {
        const streams = this.#byToken.get(token);
        if (valid.has(token) || !streams) continue;
        this.#byToken.delete(token);
        for (const req of streams) resetTransport(req, h2.NGHTTP2_CANCEL);
      }
    } catch {
      // Database unavailable: keep the streams; the next interval tries again.
    } finally {
      this.#checking = false;
    }
  }
}
