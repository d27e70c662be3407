// Verifies OIDC ID tokens of the configured issuer with jose: the issuer's discovery document
// and JWKS are fetched once and kept; an unknown key id makes ctrl fetch the JWKS again (at
// most once per cooldown), and so does a key set older than the cache time. A failed fetch
// keeps the keys ctrl has, so tokens already issued keep working while the issuer is down.
// The algorithm is the key's (`alg` of the JWK, which must be an asymmetric signature
// algorithm): the token's header never chooses it, and `alg: none` is never accepted.
import { createLocalJWKSet, decodeProtectedHeader, errors, jwtVerify, type JSONWebKeySet, type JWTPayload } from "jose";

export interface OidcOptions {
  /** The issuer URL, exactly as tokens name it (`iss`). */
  issuer: string;
  /** The audiences (client ids) a token may be for: the console's and the CLI's. */
  audiences: readonly string[];
  /** The claim holding the groups (a string array). Default "groups". */
  groupsClaim?: string;
  /** How long a fetched key set is used before it is fetched again. Default 10 min. */
  jwksCacheMs?: number;
  /** Tolerance on exp, nbf and iat. Default 30 s. */
  clockSkewMs?: number;
  /** An issuer that has not answered within this long is down. Default 5 s. */
  fetchTimeoutMs?: number;
}

export const DEFAULT_JWKS_CACHE_MS = 10 * 60_000;
export const DEFAULT_CLOCK_SKEW_MS = 30_000;
export const DEFAULT_OIDC_FETCH_TIMEOUT_MS = 5000;
/** An unknown key id fetches the key set again at most this often (a spray of forged kids costs one fetch). */
export const JWKS_REFETCH_COOLDOWN_MS = 5000;

/** Asymmetric signature algorithms: what a key may fix. */
const SIGNATURE_ALGS = new Set(["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519"]);

export interface OidcIdentity {
  subject: string;
  groups: string[];
  /** ms since the epoch. */
  expireTime: number;
}

export interface Discovery {
  issuer: string;
  authorization_endpoint: string;
  token_endpoint: string;
  jwks_uri: string;
  device_authorization_endpoint?: string;
  end_session_endpoint?: string;
}

/** Why a token was refused; `lasting` when the same token will never pass (worth remembering). */
export class OidcRefusal extends Error {
  readonly lasting: boolean;

  constructor(message: string, lasting: boolean) {
    super(message);
    this.lasting = lasting;
  }
}

export class OidcVerifier {
  readonly issuer: string;
  readonly audiences: readonly string[];
  readonly groupsClaim: string;
  readonly jwksCacheMs: number;
  readonly clockSkewMs: number;
  readonly fetchTimeoutMs: number;
  #discovery: Discovery | undefined;
  #keys: { set: ReturnType<typeof createLocalJWKSet>; kids: Set<string>; algs: Map<string, string>; fetchedAt: number } | undefined;
  /** When an unknown key id last made ctrl fetch the keys. */
  #lastUnknownKidFetch = 0;
  #fetching: Promise<void> | undefined;

  constructor(options: OidcOptions) {
    this.issuer = options.issuer;
    this.audiences = options.audiences;
    this.groupsClaim = options.groupsClaim ?? "groups";
    this.jwksCacheMs = options.jwksCacheMs ?? DEFAULT_JWKS_CACHE_MS;
    this.clockSkewMs = options.clockSkewMs ?? DEFAULT_CLOCK_SKEW_MS;
    this.fetchTimeoutMs = options.fetchTimeoutMs ?? DEFAULT_OIDC_FETCH_TIMEOUT_MS;
  }

  /**
   * The issuer's discovery document, fetched once (`fresh`: fetched now, as a sign-in does, so
   * that it fails at once, clearly, while the issuer is unreachable).
   */
  async discovery(fresh = false): Promise<Discovery> {
    if (this.#discovery && !fresh) return this.#discovery;
    const url = `${this.issuer.replace(/\/$/, "")}/.well-known/openid-configuration`;
    const document = (await this.#fetchJson(url)) as Discovery;
    if (document.issuer !== this.issuer) {
      throw new Error(`the identity provider's discovery document names issuer ${JSON.stringify(document.issuer)}, not ${JSON.stringify(this.issuer)}`);
    }
    this.#discovery = document;
    return document;
  }

  /** A token that may be a JWT (three base64url parts): worth verifying. */
  static looksLikeJwt(token: string): boolean {
    return /^eyJ[\w-]*\.[\w-]*\.[\w-]*$/.test(token);
  }

  /** The verified identity, or throws an OidcRefusal saying why. */
  async verify(token: string, now = Date.now()): Promise<OidcIdentity> {
    let header: ReturnType<typeof decodeProtectedHeader>;
    try {
      header = decodeProtectedHeader(token);
    } catch {
      throw new OidcRefusal("not a JWT", true);
    }
    const kid = header.kid;
    if (!kid) throw new OidcRefusal("the token names no key (kid)", true);
    const stale = !this.#keys || now - this.#keys.fetchedAt >= this.jwksCacheMs;
    if (stale || !this.#keys!.kids.has(kid)) await this.#refreshKeys(now, !stale);
    const keys = this.#keys;
    if (!keys) throw new OidcRefusal(`the identity provider's keys could not be fetched from ${this.issuer}`, false);
    const alg = keys.algs.get(kid);
    if (!alg) throw new OidcRefusal(`the token's key ${JSON.stringify(kid)} is not one of the issuer's`, false);
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, keys.set, {
        issuer: this.issuer,
        audience: [...this.audiences],
        algorithms: [alg],
        clockTolerance: Math.floor(this.clockSkewMs / 1000),
        currentDate: new Date(now),
        requiredClaims: ["sub", "exp", "iat"],
      }));
    } catch (error) {
      throw new OidcRefusal(refusalMessage(error), true);
    }
    const groups = payload[this.groupsClaim] ?? [];
    if (!Array.isArray(groups) || !groups.every((g) => typeof g === "string")) {
      throw new OidcRefusal(`the token's ${JSON.stringify(this.groupsClaim)} claim is not a list of strings`, true);
    }
    return { subject: payload.sub!, groups, expireTime: payload.exp! * 1000 };
  }

  /** When the key set in use is due to be fetched again (ms): what it verified is trusted until then at most. */
  keysDueAt(): number {
    return this.#keys ? this.#keys.fetchedAt + this.jwksCacheMs : 0;
  }

  /** Fetches the key set again; with `cooldown` (an unknown key id), not more than once per JWKS_REFETCH_COOLDOWN_MS. A failure keeps the keys ctrl had. */
  async #refreshKeys(now: number, cooldown: boolean): Promise<void> {
    if (cooldown) {
      if (now - this.#lastUnknownKidFetch < JWKS_REFETCH_COOLDOWN_MS) return;
      this.#lastUnknownKidFetch = now;
    }
    this.#fetching ??= (async () => {
      try {
        const { jwks_uri } = await this.discovery();
        const jwks = (await this.#fetchJson(jwks_uri)) as JSONWebKeySet;
        const algs = new Map<string, string>();
        for (const key of jwks.keys ?? []) {
          const alg = keyAlgorithm(key);
          if (key.kid && alg && (key.use === undefined || key.use === "sig")) algs.set(key.kid, alg);
        }
        this.#keys = {
          set: createLocalJWKSet({ keys: jwks.keys.filter((k) => k.kid && algs.has(k.kid)) }),
          kids: new Set(algs.keys()),
          algs,
          fetchedAt: Date.now(),
        };
      } catch {
        // Keep the keys ctrl has: the issuer being down must not end sessions it already signed.
      } finally {
        this.#fetching = undefined;
      }
    })();
    await this.#fetching;
  }

  async #fetchJson(url: string): Promise<unknown> {
    let response: Response;
    try {
      response = await fetch(url, { signal: AbortSignal.timeout(this.fetchTimeoutMs), headers: { accept: "application/json" } });
    } catch (error) {
      throw new Error(`the identity provider ${this.issuer} is unreachable (${error instanceof Error ? error.message : String(error)})`);
    }
    if (!response.ok) throw new Error(`the identity provider ${this.issuer} answered ${response.status} for ${url}`);
    return response.json();
  }
}

/**
 * The one algorithm a key signs with: its `alg`, or for a key that names none (some providers
 * publish none) the usual one of its type: RS256 for RSA, ES256/384/512 by curve, EdDSA.
 */
export function keyAlgorithm(key: { kty?: string; crv?: string; alg?: string }): string | undefined {
  if (key.alg) return SIGNATURE_ALGS.has(key.alg) ? key.alg : undefined;
  if (key.kty === "RSA") return "RS256";
  if (key.kty === "EC") return ({ "P-256": "ES256", "P-384": "ES384", "P-521": "ES512" } as Record<string, string>)[key.crv ?? ""];
  if (key.kty === "OKP" && key.crv === "Ed25519") return "EdDSA";
  return undefined;
}

function refusalMessage(error: unknown): string {
  if (error instanceof errors.JWTExpired) return "the token has expired";
  if (error instanceof errors.JWTClaimValidationFailed) return `the token's ${error.claim} claim is not accepted (${error.reason})`;
  if (error instanceof errors.JWSSignatureVerificationFailed) return "the token's signature does not verify";
  if (error instanceof errors.JOSEAlgNotAllowed) return "the token's algorithm is not its key's";
  if (error instanceof errors.JOSEError) return `the token is not valid (${error.code})`;
  return "the token is not valid";
}
