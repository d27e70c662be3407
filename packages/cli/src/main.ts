#!/usr/bin/env node
// flotilla: the operators' command line for a Flotilla ctrl. Built on commander (no
// dependencies of its own, the most used Node CLI library: help, subcommands and option
// parsing as a kubectl user expects them), the yaml package and the generated Connect clients.
import { Command, InvalidArgumentError, Option } from "commander";
import { FLOTILLA_VERSION, parseDuration } from "@flotilla/runtime";
import { connect, type Clients } from "./client.ts";
import { readConfig, resolveConnection, setContext, configPath, writeConfig, type ConnectionFlags } from "./config.ts";
import { describeFailure, EXIT, ExitError, UsageError } from "./errors.ts";
import { loadManifests } from "./manifests.ts";
import { OUTPUT_FORMATS, roleName, table, type OutputFormat } from "./output.ts";
import { apply, deleteManifests, diff, waitRunning } from "./commands/apply.ts";
import { completionScript } from "./commands/completion.ts";
import { CONTROLS, controlDescription, controlRollout, rolloutStatus } from "./commands/rollout.ts";
import { describe, get, GET_KINDS } from "./commands/get.ts";
import { audit, history, rollback } from "./commands/history.ts";
import { readSecretValue, setSecret, unsetSecret } from "./commands/secret.ts";
import { rotateSecret, testNotifier } from "./commands/notifier.ts";
import { DEFAULT_LOGIN_TIMEOUT_MS, fetchTrusting, login, logout } from "./login.ts";
import { stringify as stringifyYaml } from "yaml";
import { resourceKindNamed } from "./kinds.ts";
import { Role } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import { DurationSchema } from "@bufbuild/protobuf/wkt";
import { create } from "@bufbuild/protobuf";

const out = (text: string) => process.stdout.write(text.endsWith("\n") ? text : `${text}\n`);
const err = (text: string) => process.stderr.write(`${text}\n`);

let server: string | undefined;

function clients(command: Command): Clients {
  const flags = command.optsWithGlobals() as ConnectionFlags;
  const connection = resolveConnection(flags);
  server = connection.server;
  return connect(connection);
}

const duration = (flag: string) => (value: string) => {
  try {
    return parseDuration(value, flag);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
};
const positiveInt = (value: string) => {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError("expected a whole number of 1 or more");
  return n;
};
const outputOption = () => new Option("-o, --output <format>", "output format").choices(OUTPUT_FORMATS).default("table");
/** --timeout of the commands that wait: 5 minutes, shown as people write it (--help, the reference). */
const timeoutOption = (description: string) => new Option("--timeout <duration>", description).argParser(duration("timeout")).default(300_000, "5m");
const examples = (...lines: string[]) => `\nExamples:\n${lines.map((l) => `  ${l}`).join("\n")}\n`;

export function program(): Command {
  const root = new Command("flotilla")
    .description("Operate a Flotilla control plane: manifests, status, rollouts, history, accounts.")
    .option("--context <name>", "context of the config file to use (FLOTILLA_CONTEXT)")
    .option("--server <url>", "ctrl's URL, e.g. https://ctrl.example:7070 (FLOTILLA_SERVER)")
    .option("--token-file <file>", "file holding the bearer token (FLOTILLA_TOKEN_FILE; or FLOTILLA_TOKEN)")
    .option("--ca-cert <file>", "PEM CA certificate to trust for https (FLOTILLA_CA_CERT)")
    .showHelpAfterError()
    .addHelpText(
      "after",
      `\nConfig: ${"$"}FLOTILLA_CONFIG or ~/.config/flotilla/config.yaml (flotilla context --help).\nExit codes: 0 success; 1 error, refused call, FAILED or rolled back rollout or (diff) changes found; 2 a wait timed out.\n` +
        examples("flotilla apply -f examples/ --wait", "flotilla get deployments -o wide", "flotilla rollback deployment web --to-revision 2"),
    );

  root
    .command("apply")
    .description("create or update the objects of manifests (files, directories, - for stdin)")
    .requiredOption("-f, --filename <path...>", "manifest files or directories")
    .option("-m, --message <text>", "why: recorded with each change's revision and in the audit trail", "")
    .option("--dry-run", "check every change with the server, change nothing")
    .option("--wait", "then wait until the deployments are RUNNING, or their staged rollouts SUCCEEDED (exit 1 on FAILED or rolled back, 2 on timeout)")
    .addOption(timeoutOption("how long --wait waits"))
    .addHelpText("after", examples("flotilla apply -f web.yaml", "flotilla apply -f examples/ --wait --timeout 5m", "cat web.yaml | flotilla apply -f -"))
    .action(async (opts, command: Command) => {
      const manifests = loadManifests(opts.filename);
      await apply(clients(command), manifests, { message: opts.message, dryRun: !!opts.dryRun, wait: !!opts.wait, timeoutMs: opts.timeout }, out);
    });

  root
    .command("diff")
    .description("show what apply would change, field by field (exit 1 when something would)")
    .requiredOption("-f, --filename <path...>", "manifest files or directories")
    .addHelpText("after", examples("flotilla diff -f examples/"))
    .action(async (opts, command: Command) => {
      if (await diff(clients(command), loadManifests(opts.filename), out)) throw new ExitError("", EXIT.failed);
    });

  root
    .command("delete")
    .description("delete the objects of manifests, or one object by kind and name")
    .argument("[kind]", "deployment, sentinel, networkpolicy or region")
    .argument("[name]")
    .option("-f, --filename <path...>", "manifest files or directories")
    .option("-m, --message <text>", "why: recorded in the audit trail", "")
    .option("--ignore-not-found", "an object that does not exist is not an error")
    .addHelpText("after", examples("flotilla delete deployment web", "flotilla delete -f examples/"))
    .action(async (kind: string | undefined, name: string | undefined, opts, command: Command) => {
      const options = { message: opts.message, ignoreNotFound: !!opts.ignoreNotFound };
      if (opts.filename) {
        if (kind) throw new UsageError("give either -f or a kind and a name");
        return deleteManifests(clients(command), loadManifests(opts.filename), options, out);
      }
      if (!kind || !name) throw new UsageError("give -f FILE, or a kind and a name (flotilla delete deployment web)");
      const resourceKind = resourceKindNamed(kind);
      const source = { source: "command line", name };
      const manifest = resourceKind
        ? { ...source, kind: resourceKind, resource: undefined as never, listsSecretEnv: false }
        : kind === "region"
          ? { ...source, kind: "Region" as const, labels: {}, prometheusAddress: "" }
          : kind === "notifier"
            ? { ...source, kind: "Notifier" as const, notifier: undefined as never }
            : undefined;
      if (!manifest) throw new UsageError(`unknown kind ${JSON.stringify(kind)}: one of deployment, sentinel, networkpolicy, region, notifier`);
      return deleteManifests(clients(command), [manifest], options, out);
    });

  root
    .command("get")
    .description(`list objects, or show one: ${GET_KINDS.join(", ")}`)
    .argument("<kind>")
    .argument("[name]")
    .addOption(outputOption())
    .option("--region <region>", "only what is placed in this region (deployments: only its status)")
    .option("-l, --selector <selector>", "regions only: those a label selector picks (tier=canary, geo in (eu,us), !gpu)")
    .option("--state <state>", "deliveries only: pending, delivered or dead")
    .addHelpText(
      "after",
      examples(
        "flotilla get deployments",
        "flotilla get deploy web -o yaml",
        "flotilla get deployments --region eu-west -o wide",
        "flotilla get regions",
        "flotilla get regions -l 'geo in (eu,us)'",
        "flotilla get rollouts",
        "flotilla get secrets deployment/api",
        "flotilla get deliveries --state dead",
        "flotilla get deliveries chat",
      ),
    )
    .action(async (kind: string, name: string | undefined, opts, command: Command) =>
      get(clients(command), kind, name, opts.output as OutputFormat, { region: opts.region, selector: opts.selector, state: opts.state }, out),
    );

  root
    .command("describe")
    .description("an object in detail: spec, revision and who made it, status per region, recent revisions")
    .argument("<kind>", "deployment, sentinel or networkpolicy")
    .argument("<name>")
    .addHelpText("after", examples("flotilla describe deployment web"))
    .action(async (kind: string, name: string, _opts, command: Command) => describe(clients(command), kind, name, out));

  root
    .command("wait")
    .description(
      "wait until a deployment is RUNNING at its current revision in every region, or its staged rollout SUCCEEDED (exit 1 on FAILED or rolled back, 2 on timeout)",
    )
    .argument("<kind>", "deployment")
    .argument("<name>")
    .addOption(new Option("--for <condition>", "the condition to wait for").choices(["running"]).default("running"))
    .addOption(timeoutOption("how long to wait"))
    .addHelpText("after", examples("flotilla wait deployment web --for=running --timeout=5m"))
    .action(async (kind: string, name: string, opts, command: Command) => {
      if (resourceKindNamed(kind)?.kind !== "Deployment") throw new UsageError("wait: only deployments have a rollout to wait for");
      await waitRunning(clients(command), [name], opts.timeout, out);
    });

  const rollout = root.command("rollout").description("follow and control a deployment's staged rollout");
  rollout
    .command("status")
    .description(
      "a deployment's rollout: waves, regions, the revision each runs, phases, the bake's time left; live until it ends (exit 0 SUCCEEDED, 1 failed or rolled back, 2 on timeout)",
    )
    .argument("<name>", "the deployment")
    .addOption(
      new Option("-w, --watch <bool>", "follow until the rollout ends; false: print it once (exit 0 done, 1 failed, 2 still under way)")
        .choices(["true", "false"])
        .default("true"),
    )
    .addOption(timeoutOption("how long to follow"))
    .addHelpText("after", examples("flotilla rollout status shop", "flotilla rollout status shop --watch=false"))
    .action(async (name: string, opts, command: Command) =>
      rolloutStatus(clients(command), name, { watch: opts.watch === "true", timeoutMs: opts.timeout, redraw: !!process.stdout.isTTY }, out),
    );
  for (const control of CONTROLS) {
    rollout
      .command(control)
      .description(`${controlDescription(control)} (deployer)`)
      .argument("<name>", "the deployment (its newest rollout), or a rollout (shop-7)")
      .option("-m, --message <text>", "why: recorded in the audit trail", "")
      .addHelpText("after", examples(`flotilla rollout ${control} shop -m "…"`))
      .action(async (name: string, opts, command: Command) => controlRollout(clients(command), control, name, opts.message, out));
  }

  const notifier = root.command("notifier").description("where rollout events are delivered (kind: Notifier manifests; get notifiers, get deliveries)");
  notifier
    .command("test")
    .description("send a notifier.test event to a notifier and wait for its first attempt (exit 0 delivered, 1 failed, 2 on timeout)")
    .argument("<name>", "the notifier")
    .addOption(new Option("--wait <bool>", "wait for the first attempt's outcome").choices(["true", "false"]).default("true"))
    .addOption(timeoutOption("how long to wait"))
    .addHelpText("after", examples("flotilla notifier test chat", "flotilla notifier test chat --wait=false"))
    .action(async (name: string, opts, command: Command) => testNotifier(clients(command), name, { wait: opts.wait === "true", timeoutMs: opts.timeout }, out));
  notifier
    .command("rotate-secret")
    .description("give a notifier a new signing secret, shown once; the old one signs nothing from now on (admin)")
    .argument("<name>", "the notifier")
    .addHelpText("after", examples("flotilla notifier rotate-secret chat"))
    .action(async (name: string, _opts, command: Command) => rotateSecret(clients(command), name, out));

  const secret = root.command("secret").description("a deployment's secret env: values are written, never read back (get secrets shows fingerprints)");
  secret
    .command("set")
    .description("set or replace one value, read from stdin or --from-file (never a flag); the other secrets are kept")
    .argument("<deployment>", "deployment/NAME")
    .argument("<key>", "the env variable")
    .option("--from-file <path>", "the value: the file's content as it is")
    .option("-m, --message <text>", "why: recorded with the revision", "")
    .addHelpText(
      "after",
      examples('echo -n "$VALUE" | flotilla secret set deployment/api DB_PASSWORD', "flotilla secret set deployment/api TLS_KEY --from-file key.pem"),
    )
    .action(async (target: string, key: string, opts, command: Command) =>
      setSecret(clients(command), target, key, readSecretValue(opts.fromFile), opts.message, out),
    );
  secret
    .command("unset")
    .description("delete one value")
    .argument("<deployment>", "deployment/NAME")
    .argument("<key>")
    .option("-m, --message <text>", "why: recorded with the revision", "")
    .action(async (target: string, key: string, opts, command: Command) => unsetSecret(clients(command), target, key, opts.message, out));

  root
    .command("history")
    .description("the kept revisions of an object: who changed it, when, and why")
    .argument("<kind>", "deployment, sentinel or networkpolicy")
    .argument("<name>")
    .addOption(outputOption())
    .addHelpText("after", examples("flotilla history deployment web"))
    .action(async (kind: string, name: string, opts, command: Command) => history(clients(command), kind, name, opts.output as OutputFormat, out));

  root
    .command("rollback")
    .description("a new revision carrying an earlier revision's spec (the same checks as an update)")
    .argument("<kind>", "deployment, sentinel or networkpolicy")
    .argument("<name>")
    .requiredOption("--to-revision <n>", "the revision whose spec to go back to", positiveInt)
    .option("-m, --message <text>", "why: recorded with the new revision", "")
    .option("--wait", "then wait until the deployment is RUNNING")
    .addOption(timeoutOption("how long --wait waits"))
    .addHelpText("after", examples("flotilla history deployment web", "flotilla rollback deployment web --to-revision 2 -m 'v3 leaks memory' --wait"))
    .action(async (kind: string, name: string, opts, command: Command) => {
      const c = clients(command);
      await rollback(c, kind, name, opts.toRevision, opts.message, out);
      if (opts.wait && resourceKindNamed(kind)?.kind === "Deployment") await waitRunning(c, [name], opts.timeout, out);
    });

  root
    .command("audit")
    .description("who did what, when, to which object and revision (newest first)")
    .option("--since <duration>", "only the last 1h, 30m, …", duration("since"))
    .option("--actor <name>", "only this actor's (an operator's name, or admin)")
    .option("--project <name>", "only this project's (without a fleet-wide role, only your projects' are shown anyway)")
    .option("--limit <n>", "at most this many events", positiveInt, 100)
    .addOption(outputOption())
    .addHelpText("after", examples("flotilla audit --since 1h", "flotilla audit --actor dan", "flotilla audit --project team-a"))
    .action(async (opts, command: Command) =>
      audit(clients(command), { sinceMs: opts.since, actor: opts.actor, project: opts.project }, opts.limit, opts.output as OutputFormat, out),
    );

  const operator = root.command("operator").description("operator accounts: named tokens with a fleet-wide role, or roles from projects (admin)");
  operator
    .command("create")
    .description("create an operator and print its token (shown once)")
    .argument("<name>")
    .addOption(new Option("--role <role>", "what it may do fleet-wide; without: nothing but what projects grant it").choices(["viewer", "deployer", "admin"]))
    .option("--ttl <duration>", "the token stops working after this long", duration("ttl"))
    .addHelpText(
      "after",
      examples("flotilla operator create dan --role deployer > dan.token", "flotilla operator create alice > alice.token", "flotilla get operators"),
    )
    .action(async (name: string, opts, command: Command) => {
      const role = opts.role === undefined ? Role.UNSPECIFIED : { viewer: Role.VIEWER, deployer: Role.DEPLOYER, admin: Role.ADMIN }[opts.role as "viewer"];
      const ttl = opts.ttl === undefined ? undefined : create(DurationSchema, { seconds: BigInt(Math.floor(opts.ttl / 1000)), nanos: (opts.ttl % 1000) * 1e6 });
      const created = await clients(command).operators.createOperator({ name, role, expiration: ttl ? { case: "ttl", value: ttl } : { case: undefined } });
      const granted = opts.role === undefined ? "no fleet-wide role (projects grant its roles)" : `role ${opts.role}`;
      err(`operator/${name} created with ${granted}; its token follows, shown this once`);
      out(created.token);
    });
  operator
    .command("revoke")
    .description("delete an operator; its token is refused everywhere within a second")
    .argument("<name>")
    .action(async (name: string, _opts, command: Command) => {
      await clients(command).operators.revokeOperator({ name });
      out(`operator/${name} revoked`);
    });

  const token = root.command("token").description("agent tokens of a region (admin)");
  token
    .command("create")
    .description("mint an agent token for a region and print it (shown once)")
    .argument("<region>")
    .option("--ttl <duration>", "the token stops working after this long", duration("ttl"))
    .action(async (region: string, opts, command: Command) => {
      const ttl = opts.ttl === undefined ? undefined : create(DurationSchema, { seconds: BigInt(Math.floor(opts.ttl / 1000)), nanos: (opts.ttl % 1000) * 1e6 });
      const created = await clients(command).regions.createAgentToken({ region, expiration: ttl ? { case: "ttl", value: ttl } : { case: undefined } });
      err(`agent token ${created.tokenId} created for region ${region}; it follows, shown this once`);
      out(created.token);
    });
  token
    .command("revoke")
    .description("revoke an agent token by its id (flotilla get tokens)")
    .argument("<id>")
    .action(async (id: string, _opts, command: Command) => {
      await clients(command).regions.revokeAgentToken({ id });
      out(`token/${id} revoked`);
    });

  const context = root.command("context").description(`connections to ctrl, kept in ${"$"}FLOTILLA_CONFIG or ~/.config/flotilla/config.yaml`);
  context
    .command("set")
    .description("add or change a context from --server (required), --token-file and --ca-cert; the first one becomes current")
    .argument("<name>")
    .addHelpText("after", examples("flotilla context set prod --server https://ctrl.example:7070 --token-file ~/.flotilla/prod.token --ca-cert ca.pem"))
    .action((name: string, _opts, command: Command) => {
      const opts = command.optsWithGlobals() as ConnectionFlags;
      if (!opts.server) throw new UsageError("context set: --server is required");
      setContext({ name, server: opts.server, tokenFile: opts.tokenFile, caCert: opts.caCert });
      out(`context ${name} set in ${configPath()}`);
    });
  context
    .command("use")
    .description("make a context the current one")
    .argument("<name>")
    .action((name: string) => {
      const config = readConfig();
      if (!config.contexts.some((c) => c.name === name)) throw new UsageError(`no context ${JSON.stringify(name)} in ${configPath()}`);
      writeConfig({ ...config, currentContext: name });
      out(`now using context ${name}`);
    });
  context
    .command("list")
    .description("the contexts (* marks the current one)")
    .action(() => {
      const config = readConfig();
      out(
        table(
          ["CURRENT", "NAME", "SERVER", "TOKEN-FILE"],
          config.contexts.map((c) => [c.name === config.currentContext ? "*" : "", c.name, c.server, c.tokenFile ?? "-"]),
        ),
      );
    });

  root
    .command("login")
    .description("sign in with single sign-on (device authorization grant): prints a URL and a code, waits; the tokens go into the context, mode 0600")
    .addOption(timeoutOption("how long to wait for the sign-in").default(DEFAULT_LOGIN_TIMEOUT_MS, "10m"))
    .addHelpText("after", examples("flotilla login --server http://127.0.0.1:7070", "flotilla --context prod login"))
    .action(async (opts: { timeout: number }, command: Command) => {
      const flags = command.optsWithGlobals() as ConnectionFlags;
      const connection = resolveConnection(flags);
      server = connection.server;
      const context = connection.context?.server === connection.server ? connection.context : { name: flags.context ?? "default", server: connection.server };
      await login({ server: connection.server, context, timeoutMs: opts.timeout, fetch: fetchTrusting(connection.server, connection.caCert), out });
      const me = await connect({ ...resolveConnection({ ...flags, context: context.name }), token: undefined }).operators.whoAmI({});
      out(`signed in as ${me.subject || me.actor}${me.groups.length ? ` (groups ${me.groups.join(", ")})` : ""}; context ${context.name} in ${configPath()}`);
    });
  root
    .command("logout")
    .description("forget the tokens of flotilla login in the context")
    .action((_opts, command: Command) => {
      const connection = resolveConnection(command.optsWithGlobals() as ConnectionFlags);
      if (!connection.context?.oidc) throw new UsageError(`context ${connection.contextName ?? "(none)"} is not signed in`);
      logout(connection.context);
      out(`signed out of context ${connection.context.name}`);
    });
  root
    .command("whoami")
    .description("who you are at ctrl: the actor, the single sign-on subject and groups, and the role in each project")
    .addOption(outputOption())
    .action(async (opts: { output: OutputFormat }, command: Command) => {
      const me = await clients(command).operators.whoAmI({});
      const roles = me.projectRoles.map(({ project, role }) => ({ project, role: roleName(role) }));
      if (opts.output === "json" || opts.output === "yaml") {
        const doc = { actor: me.actor, subject: me.subject, groups: me.groups, role: me.role ? roleName(me.role) : "", projects: roles };
        out(opts.output === "json" ? JSON.stringify(doc, null, 2) : stringifyYaml(doc));
        return;
      }
      out(`actor:   ${me.actor}`);
      if (me.subject) out(`subject: ${me.subject}`);
      if (me.subject || me.groups.length) out(`groups:  ${me.groups.join(", ") || "(none)"}`);
      out(`role:    ${me.role ? `${roleName(me.role)} (fleet-wide)` : "none fleet-wide"}`);
      out(
        roles.length
          ? table(
              ["PROJECT", "ROLE"],
              roles.map((r) => [r.project, r.role]),
            )
          : "no role in any project",
      );
    });

  root
    .command("version")
    .description("the client's version, and the server's with who you are there")
    .action(async (_opts, command: Command) => {
      out(`client: ${FLOTILLA_VERSION}`);
      const me = await clients(command).operators.whoAmI({});
      out(`server: ${me.serverVersion} (${server}, as ${me.actor}${me.role ? `, role ${roleName(me.role)}` : ""})`);
      for (const { project, role } of me.projectRoles) out(`project ${project}: role ${roleName(role)}`);
    });

  root
    .command("completion")
    .description("a completion script: source <(flotilla completion bash)")
    .argument("<shell>", "bash or zsh")
    .action((shell: string) => {
      out(completionScript(root, shell));
    });

  return root;
}

export async function main(argv: string[]): Promise<number> {
  const root = program();
  root.exitOverride();
  root.configureOutput({ writeErr: (s) => process.stderr.write(s), writeOut: (s) => process.stdout.write(s) });
  try {
    await root.parseAsync(argv, { from: "user" });
    return EXIT.ok;
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (typeof code === "string" && code.startsWith("commander.")) {
      // Commander has printed the problem (or the help) already.
      return code === "commander.helpDisplayed" || code === "commander.version" || code === "commander.help" ? EXIT.ok : EXIT.failed;
    }
    const failure = describeFailure(error, server);
    if (failure.line) err(failure.line);
    return failure.code;
  }
}

if (import.meta.main) {
  const code = await main(process.argv.slice(2));
  // Exit as soon as the output is out, whatever sockets the clients keep alive.
  process.stdout.write("", () => process.exit(code));
}
