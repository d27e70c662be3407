// The flag pages: ctrl's and the agent's from the option tables their --help prints, the
// emulator's from its --help (it parses its flags with node:util, without such a table).
import { execFileSync } from "node:child_process";
import { ctrlFlagTable } from "@flotilla/ctrl/config";
import { agentFlagTable } from "@flotilla/agent/flags";
import { cell, code, generatedHeader, table } from "./markdown.ts";

const CONVENTIONS =
  "Every flag is also an environment variable; a flag wins over its variable, the variable over the default. " +
  "Durations are written `250ms`, `30s`, `10m`, `1h`. `--help` prints the same list.";

/** ctrl's command-line tools beside the server, each with the script that runs it. */
const CTRL_TOOLS = [
  { command: "pnpm migrate", script: "packages/store/src/migrate-cli.ts" },
  { command: "pnpm pki", script: "packages/ctrl/src/pki-cli.ts" },
  { command: "pnpm secrets", script: "packages/ctrl/src/secrets-cli.ts" },
];

const helpOf = (script: string) => execFileSync(process.execPath, [script, "--help"], { encoding: "utf8" }).trimEnd();

export function ctrlPage(): string {
  return [
    generatedHeader("ctrl: flags and environment", "CTRL_OPTIONS (packages/ctrl/src/config.ts) and its tools' --help"),
    `\`pnpm ctrl [flags]\` (in the image, the flags follow its entrypoint). ${CONVENTIONS} How ctrl behaves at run time — health, drain, logs, bounds — is [Running ctrl](../operations/ctrl.md).\n`,
    ctrlFlagTable(),
    "",
    "## Tools",
    "",
    "Beside the server, for its database, certificates and secret keys (in the image: `/app/migrate.mjs` and `/app/pki.mjs`):",
    "",
    ...CTRL_TOOLS.flatMap(({ command, script }) => [`### ${command}`, "", "```text", helpOf(script), "```", ""]),
  ].join("\n");
}

export function agentPage(): string {
  return [
    generatedHeader("The agent: flags and environment", "AGENT_OPTIONS (packages/agent/src/flags.ts)"),
    `\`pnpm agent --region NAME [flags]\` (in the image, the flags follow its entrypoint). ${CONVENTIONS} How the agent works and how to run it is [Running the agent](../operations/agent.md).\n`,
    agentFlagTable(),
    "",
  ].join("\n");
}

interface EmulatorFlag {
  flag: string;
  value: string;
  meaning: string;
}

/** The options of the emulator's --help: `  --name value   meaning`, continued on indented lines. */
export function emulatorFlags(help: string): EmulatorFlag[] {
  const section = help.slice(help.indexOf("\nOptions"), help.indexOf("\nEmulator endpoints"));
  const flags: EmulatorFlag[] = [];
  for (const line of section.split("\n")) {
    const option = /^ {2}--([\w-]+)(?: (\S+))?\s*(.*)$/.exec(line);
    if (option) flags.push({ flag: option[1]!, value: option[2] ?? "", meaning: option[3]! });
    else if (/^ {10,}\S/.test(line) && flags.length > 0) flags.at(-1)!.meaning += ` ${line.trim()}`;
  }
  return flags.filter((f) => f.flag !== "help");
}

export function emulatorPage(): string {
  const help = helpOf("packages/k8s-emulator/src/main.ts");
  const rows = emulatorFlags(help).map(({ flag, value, meaning }) => {
    const fallback = /\(default ([^)]+)\)/.exec(meaning)?.[1] ?? "";
    const env = `FLOTILLA_EMULATOR_${flag.toUpperCase().replaceAll("-", "_")}`;
    return [code(`--${flag}${value ? ` ${value}` : ""}`), code(env), fallback ? code(fallback) : "", cell(meaning.replace(/\s*\(default [^)]+\)/, ""))];
  });
  const endpoints = help.slice(help.indexOf("\nEmulator endpoints") + 1).trim();
  return [
    generatedHeader("The Kubernetes emulator: flags and environment", "`node packages/k8s-emulator/src/main.ts --help`"),
    "`pnpm emulator [flags]`: the Kubernetes API server `pnpm start` and the tests run in place of a cluster. Every flag is also an environment variable.\n",
    table(["Flag", "Environment", "Default", "Meaning"], rows),
    "",
    cell(endpoints),
    "",
  ].join("\n");
}
