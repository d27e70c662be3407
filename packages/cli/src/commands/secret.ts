// flotilla secret set|unset, flotilla get secrets: a deployment's secret env by names and
// fingerprints. A value is read from stdin or a file, never from a flag (process lists and
// shell history keep those), and is never printed: ctrl answers with a fingerprint only.
import { readFileSync } from "node:fs";
import { create } from "@bufbuild/protobuf";
import { SecretEnvVarSchema, type Deployment } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { Clients } from "../client.ts";
import { UsageError } from "../errors.ts";
import { resourceKindNamed, secretNames } from "../kinds.ts";
import { structured, table, type OutputFormat } from "../output.ts";

type Out = (text: string) => void;

/** "deployment/api", "deploy/api" or "api": the deployment's name. */
export function deploymentNamed(target: string): string {
  const slash = target.indexOf("/");
  if (slash < 0) return target;
  if (resourceKindNamed(target.slice(0, slash))?.kind !== "Deployment") throw new UsageError(`${target}: only deployments have secret env (deployment/NAME)`);
  return target.slice(slash + 1);
}

/** The value: the file's bytes as they are, or stdin's (a terminal is refused: the value would echo). */
export function readSecretValue(fromFile: string | undefined, stdinIsTerminal = process.stdin.isTTY === true, stdin = () => readFileSync(0, "utf8")): string {
  if (fromFile !== undefined) return readFileSync(fromFile, "utf8");
  if (stdinIsTerminal) throw new UsageError('the value comes from stdin (echo -n "$VALUE" | flotilla secret set …) or --from-file, never from a flag');
  return stdin();
}

async function deployment(clients: Clients, name: string): Promise<Deployment> {
  const found = await resourceKindNamed("deployment")!.get(clients, name);
  if (!found) throw new UsageError(`deployment/${name} not found`);
  return found as Deployment;
}

/** Sets or replaces one value; every other secret is kept (sent by name) and the write is a compare-and-set on the revision. */
export async function setSecret(clients: Clients, target: string, key: string, value: string, message: string, out: Out): Promise<void> {
  const name = deploymentNamed(target);
  const current = await deployment(clients, name);
  const before = current.secretEnv.find((s) => s.name === key)?.fingerprint;
  const secretEnv = secretNames(current).map((s) => (s.name === key ? create(SecretEnvVarSchema, { name: key, value }) : s));
  if (before === undefined) secretEnv.push(create(SecretEnvVarSchema, { name: key, value }));
  const written = await writeSecrets(clients, current, secretEnv, message);
  const after = written.secretEnv.find((s) => s.name === key)?.fingerprint ?? "";
  const what =
    before === undefined ? `set (fingerprint ${after})` : before === after ? `unchanged (fingerprint ${after})` : `changed (fingerprint ${before} → ${after})`;
  out(`deployment/${name}: secret ${key} ${what}, revision ${written.revision}`);
}

/** Deletes one value. */
export async function unsetSecret(clients: Clients, target: string, key: string, message: string, out: Out): Promise<void> {
  const name = deploymentNamed(target);
  const current = await deployment(clients, name);
  if (!current.secretEnv.some((s) => s.name === key)) throw new UsageError(`deployment/${name} has no secret ${key}`);
  const written = await writeSecrets(
    clients,
    current,
    secretNames(current).filter((s) => s.name !== key),
    message,
  );
  out(`deployment/${name}: secret ${key} removed, revision ${written.revision}`);
}

async function writeSecrets(clients: Clients, current: Deployment, secretEnv: Deployment["secretEnv"], message: string): Promise<Deployment> {
  const { deployment } = await clients.deployments.updateDeployment({
    deployment: { ...current, secretEnv, status: [], rollout: undefined },
    expectedRevision: current.revision,
    message,
  });
  return deployment!;
}

/** Names, set and fingerprints: never a value (ctrl has none to give). */
export async function getSecrets(clients: Clients, target: string | undefined, format: OutputFormat, out: Out): Promise<void> {
  if (target === undefined) throw new UsageError("get secrets: name the deployment (flotilla get secrets deployment/NAME)");
  const name = deploymentNamed(target);
  const secrets = (await deployment(clients, name)).secretEnv.map((s) => ({ name: s.name, set: s.set, fingerprint: s.fingerprint }));
  if (format === "json" || format === "yaml") return out(structured({ deployment: name, secretEnv: secrets }, format));
  out(
    table(
      ["NAME", "SET", "FINGERPRINT"],
      secrets.map((s) => [s.name, String(s.set), s.fingerprint]),
    ),
  );
}
