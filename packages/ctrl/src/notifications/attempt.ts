// One HTTP attempt of a delivery: a POST with a deadline over the whole exchange (connect,
// send, answer, body), no redirects followed, at most 64 KiB of the answer read. Its result is
// what the dispatcher decides with: the status, a Retry-After, or why it failed. Errors name
// no URL (a Slack URL carries its own secret) and never the signing secret.
import http from "node:http";
import https from "node:https";
import { isIP } from "node:net";
import { addressRefusal, checkedLookup, type AddressPolicy } from "./address.ts";

const MAX_ANSWER_BYTES = 64 * 1024;

export interface AttemptResult {
  /** HTTP status; 0 when none came. */
  status: number;
  /** The answer's Retry-After, in ms from now (seconds or an HTTP date); undefined: none. */
  retryAfterMs?: number;
  /** Why it failed (undefined: 2xx). */
  error?: string;
}

export async function attempt(url: string, headers: Record<string, string>, payload: string, timeoutMs: number, policy: AddressPolicy): Promise<AttemptResult> {
  const target = new URL(url);
  const host = target.hostname.replace(/^\[|\]$/g, "");
  if (isIP(host) !== 0) {
    const refused = addressRefusal(host, policy);
    if (refused) return { status: 0, error: `address refused: ${refused}` };
  }
  const client = target.protocol === "https:" ? https : http;
  return new Promise<AttemptResult>((resolve) => {
    let settled = false;
    const done = (result: AttemptResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(result);
    };
    const request = client.request(
      target,
      {
        method: "POST",
        headers: { ...headers, "content-length": String(Buffer.byteLength(payload)) },
        lookup: checkedLookup(policy) as never,
        agent: false,
      },
      (response) => {
        const status = response.statusCode ?? 0;
        let read = 0;
        response.on("data", (chunk: Buffer) => {
          read += chunk.length;
          if (read > MAX_ANSWER_BYTES) response.destroy();
        });
        const finish = () => {
          const retryAfterMs = parseRetryAfter(response.headers["retry-after"], Date.now());
          done(status >= 200 && status < 300 ? { status } : { status, retryAfterMs, error: `HTTP ${status}` });
        };
        response.on("end", finish);
        response.on("close", finish);
        response.on("error", finish);
      },
    );
    const timer = setTimeout(() => {
      request.destroy();
      done({ status: 0, error: `no answer within ${timeoutMs} ms` });
    }, timeoutMs);
    request.on("error", (error: NodeJS.ErrnoException) => done({ status: 0, error: describe(error) }));
    request.end(payload);
  });
}

function describe(error: NodeJS.ErrnoException): string {
  if (error.code === "EADDRREFUSED") return error.message;
  return error.code ? `${error.code}: ${error.message.split(" ").slice(0, 6).join(" ")}` : error.message.slice(0, 200);
}

/** Retry-After (delay-seconds or an HTTP date) in ms from `now`; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | string[] | undefined, now: number): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (!text) return undefined;
  if (/^\d+$/.test(text.trim())) return Number(text.trim()) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
