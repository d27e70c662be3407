// Contexts: named connections to a ctrl (server URL, CA certificate, token file), kept in
// ~/.config/flotilla/config.yaml (or $FLOTILLA_CONFIG), as kubectl keeps its kubeconfig.
// Flags override the context, FLOTILLA_* variables override the file. A token is only ever
// read from a file or FLOTILLA_TOKEN: never a flag, which every user of the host could read
// in the process list.
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { parse, stringify } from "yaml";
import { UsageError } from "./errors.ts";
import { currentIdToken } from "./login.ts";

export interface Context {
  name: string;
  server: string;
  /** File holding the bearer token. */
  tokenFile?: string;
  /** PEM CA certificate(s) to trust for an https server. */
  caCert?: string;
  /** The tokens of `flotilla login` (single sign-on). */
  oidc?: OidcTokens;
}

/** What `flotilla login` keeps: the ID token is the bearer token, the refresh token renews it. */
export interface OidcTokens {
  issuer: string;
  clientId: string;
  idToken: string;
  refreshToken?: string;
}

export interface ConfigFile {
  currentContext?: string;
  contexts: Context[];
}

/** What a command connects with, once flags, variables and the context are combined. */
export interface Connection {
  server: string;
  token: string | undefined;
  caCert: Buffer | undefined;
  /** Where each part came from, for error messages. */
  contextName: string | undefined;
  /** The context, when one was used (`flotilla login` keeps its tokens there). */
  context?: Context;
  /** With no token: the context's signed-in ID token, renewed when about to expire. */
  tokenSource?: () => Promise<string>;
}

export interface ConnectionFlags {
  context?: string;
  server?: string;
  tokenFile?: string;
  caCert?: string;
}

export function configPath(env = process.env): string {
  return env.FLOTILLA_CONFIG || join(env.XDG_CONFIG_HOME || join(homedir(), ".config"), "flotilla", "config.yaml");
}

export function readConfig(path = configPath()): ConfigFile {
  if (!existsSync(path)) return { contexts: [] };
  let raw: unknown;
  try {
    raw = parse(readFileSync(path, "utf8"));
  } catch (error) {
    throw new UsageError(`${path}: not valid YAML: ${(error as Error).message.split("\n")[0]}`);
  }
  const doc = (raw ?? {}) as { "current-context"?: unknown; contexts?: unknown };
  const contexts = Array.isArray(doc.contexts) ? doc.contexts : [];
  return {
    currentContext: typeof doc["current-context"] === "string" ? doc["current-context"] : undefined,
    contexts: contexts.map((c: Record<string, unknown>, i: number) => {
      if (typeof c?.name !== "string" || typeof c.server !== "string") throw new UsageError(`${path}: contexts[${i}] needs a name and a server`);
      return {
        name: c.name,
        server: c.server,
        tokenFile: typeof c["token-file"] === "string" ? c["token-file"] : undefined,
        caCert: typeof c["ca-cert"] === "string" ? c["ca-cert"] : undefined,
        oidc: oidcTokens(c.oidc),
      };
    }),
  };
}

function oidcTokens(raw: unknown): OidcTokens | undefined {
  const o = raw as Record<string, unknown> | undefined;
  if (typeof o?.issuer !== "string" || typeof o["client-id"] !== "string" || typeof o["id-token"] !== "string") return undefined;
  return {
    issuer: o.issuer,
    clientId: o["client-id"],
    idToken: o["id-token"],
    refreshToken: typeof o["refresh-token"] === "string" ? o["refresh-token"] : undefined,
  };
}

/** Writes the file with mode 0600 (it may hold tokens), whatever its mode was. */
export function writeConfig(config: ConfigFile, path = configPath()): void {
  mkdirSync(dirname(path), { recursive: true });
  const doc = {
    "current-context": config.currentContext,
    contexts: config.contexts.map((c) => ({
      name: c.name,
      server: c.server,
      "token-file": c.tokenFile,
      "ca-cert": c.caCert,
      oidc: c.oidc && { issuer: c.oidc.issuer, "client-id": c.oidc.clientId, "id-token": c.oidc.idToken, "refresh-token": c.oidc.refreshToken },
    })),
  };
  writeFileSync(path, stringify(doc), { mode: 0o600 });
  chmodSync(path, 0o600);
}

/** Adds or replaces a context (paths made absolute); the first context (or, with `makeCurrent`, this one) becomes the current one. */
export function setContext(context: Context, path = configPath(), makeCurrent = false): ConfigFile {
  const config = readConfig(path);
  const i = config.contexts.findIndex((c) => c.name === context.name);
  const absolute = {
    oidc: config.contexts[i]?.server === context.server ? config.contexts[i]?.oidc : undefined,
    ...context,
    tokenFile: context.tokenFile && resolve(context.tokenFile),
    caCert: context.caCert && resolve(context.caCert),
  };
  if (i >= 0) config.contexts[i] = absolute;
  else config.contexts.push(absolute);
  if (makeCurrent) config.currentContext = context.name;
  config.currentContext ??= context.name;
  writeConfig(config, path);
  return config;
}

/** The connection of a command: flags, then FLOTILLA_* variables, then the (current) context. */
export function resolveConnection(flags: ConnectionFlags, env = process.env): Connection {
  const config = readConfig(configPath(env));
  const contextName = flags.context ?? env.FLOTILLA_CONTEXT ?? config.currentContext;
  const context = contextName === undefined ? undefined : config.contexts.find((c) => c.name === contextName);
  if (contextName !== undefined && !context && (flags.context ?? env.FLOTILLA_CONTEXT))
    throw new UsageError(`context ${JSON.stringify(contextName)} is not in ${configPath(env)} (flotilla context list)`);
  const server = flags.server ?? env.FLOTILLA_SERVER ?? context?.server;
  if (!server) throw new UsageError(`no server: give --server URL, set FLOTILLA_SERVER, or add a context (flotilla context set NAME --server URL)`);
  const tokenFile = flags.tokenFile ?? env.FLOTILLA_TOKEN_FILE ?? context?.tokenFile;
  const caCertFile = flags.caCert ?? env.FLOTILLA_CA_CERT ?? context?.caCert;
  const token = env.FLOTILLA_TOKEN || (tokenFile ? readToken(tokenFile) : undefined);
  // The context's sign-in counts only for the context's own server.
  const signedIn = !token && context?.oidc && server === context.server ? context : undefined;
  return {
    server,
    token,
    caCert: caCertFile ? readFile(caCertFile, "--ca-cert") : undefined,
    contextName: context?.name,
    context,
    tokenSource: signedIn && (() => currentIdToken(signedIn)),
  };
}

function readToken(file: string): string {
  const token = readFile(file, "--token-file").toString("utf8").trim();
  if (!token) throw new UsageError(`token file ${file} is empty`);
  return token;
}

function readFile(file: string, what: string): Buffer {
  try {
    return readFileSync(file);
  } catch (error) {
    throw new UsageError(`${what} ${file}: ${(error as NodeJS.ErrnoException).code === "ENOENT" ? "no such file" : (error as Error).message}`);
  }
}
