// The console's session: an encrypted cookie (AES-256-GCM, its key derived from the client
// secret, so every replica reads it) holding the signed-in subject, its groups, when it ends
// and its CSRF token. HttpOnly, Secure, SameSite=Strict: the page's scripts never see a token
// that signs in. Every call with the cookie must carry the CSRF token in a header (the page
// reads it from /auth/session, which another site cannot read).
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes, timingSafeEqual } from "node:crypto";

export const SESSION_COOKIE = "flotilla_session";
export const LOGIN_COOKIE = "flotilla_login";
export const CSRF_HEADER = "x-flotilla-csrf";
/** A session lasts at most this long (and never past its ID token). */
export const DEFAULT_SESSION_MAX_AGE_MS = 8 * 3600_000;

export interface Session {
  subject: string;
  groups: string[];
  /** ms since the epoch. */
  expireTime: number;
  csrf: string;
}

export type SessionCheck = { session: Session } | { refusal: "session" | "csrf" };

export class SessionCodec {
  readonly #key: Buffer;

  constructor(secret: string, purpose = "flotilla console session") {
    this.#key = Buffer.from(hkdfSync("sha256", secret, "flotilla", purpose, 32));
  }

  seal(value: unknown): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", this.#key, iv);
    const body = Buffer.concat([cipher.update(JSON.stringify(value), "utf8"), cipher.final()]);
    return Buffer.concat([iv, cipher.getAuthTag(), body]).toString("base64url");
  }

  open<T>(sealed: string): T | undefined {
    try {
      const raw = Buffer.from(sealed, "base64url");
      if (raw.length < 29) return undefined;
      const decipher = createDecipheriv("aes-256-gcm", this.#key, raw.subarray(0, 12));
      decipher.setAuthTag(raw.subarray(12, 28));
      return JSON.parse(Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString("utf8")) as T;
    } catch {
      return undefined;
    }
  }

  /** The session a request's cookie holds, if valid and unexpired; `csrf` must match its token. */
  check(cookieHeader: string | null | undefined, csrf: string | null | undefined, now = Date.now()): SessionCheck | undefined {
    const sealed = cookieValue(cookieHeader, SESSION_COOKIE);
    if (sealed === undefined) return undefined;
    const session = this.open<Session>(sealed);
    if (!session || typeof session.expireTime !== "number" || session.expireTime <= now) return { refusal: "session" };
    if (!csrf || !sameString(csrf, session.csrf)) return { refusal: "csrf" };
    return { session };
  }
}

export function newCsrfToken(): string {
  return randomBytes(24).toString("base64url");
}

export function cookieValue(header: string | null | undefined, name: string): string | undefined {
  for (const part of (header ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

export function setCookie(name: string, value: string, options: { maxAgeS: number; sameSite: "Strict" | "Lax"; path?: string }): string {
  return `${name}=${value}; Path=${options.path ?? "/"}; Max-Age=${Math.max(0, Math.floor(options.maxAgeS))}; HttpOnly; Secure; SameSite=${options.sameSite}`;
}

function sameString(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
