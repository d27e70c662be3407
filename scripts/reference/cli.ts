// The `flotilla` page, from the CLI's commander program: every command with its arguments,
// flags and the examples its --help shows.
import { program } from "@flotilla/cli/main";
import { cell, code, generatedHeader, table } from "./markdown.ts";

// commander is the CLI's, not a dependency of the scripts: its types through the CLI's program.
type Command = ReturnType<typeof program>;
type Option = Command["options"][number];

/** What `command --help` prints, including the text added after it (the examples). */
function helpText(command: Command): string {
  let text = "";
  command.configureOutput({ writeOut: (s) => (text += s), writeErr: (s) => (text += s) });
  command.outputHelp();
  return text;
}

/** The lines under "Examples:" of a command's help. */
function examples(command: Command): string[] {
  const help = helpText(command);
  const from = help.indexOf("\nExamples:\n");
  if (from < 0) return [];
  return help
    .slice(from + "\nExamples:\n".length)
    .split("\n")
    .filter((line) => line.startsWith("  "))
    .map((line) => line.trim());
}

function fullName(command: Command): string {
  const names: string[] = [];
  for (let c: Command | null = command; c; c = c.parent) names.unshift(c.name());
  return names.join(" ");
}

function optionRows(options: readonly Option[]): string[][] {
  return options.map((o) => {
    // As --help shows it: the description a default was given with (5m), else the value.
    const shown = o.defaultValueDescription ?? o.defaultValue;
    const fallback = shown === undefined || shown === "" || shown === false ? "" : code(String(shown));
    const choices = o.argChoices ? ` (${o.argChoices.join(", ")})` : "";
    return [code(o.flags), fallback, cell(`${o.description}${choices}`)];
  });
}

function section(command: Command): string[] {
  const lines = [`## ${fullName(command)}`, "", cell(command.description()), "", "```", `${fullName(command)} ${command.usage()}`, "```", ""];
  const args = command.registeredArguments;
  if (args.length > 0) {
    lines.push(
      table(
        ["Argument", "Meaning"],
        args.map((a) => [`\`${a.name()}\`${a.required ? "" : " (optional)"}`, cell(a.description || "")]),
      ),
      "",
    );
  }
  if (command.options.length > 0) lines.push(table(["Flag", "Default", "Meaning"], optionRows(command.options)), "");
  const shown = examples(command);
  if (shown.length > 0) lines.push("Examples:", "", "```sh", ...shown, "```", "");
  return [...lines, ...command.commands.filter((c) => !(c as unknown as { _hidden?: boolean })._hidden).flatMap(section)];
}

export function cliPage(): string {
  const root = program();
  const commands = root.commands.filter((c) => c.name() !== "help");
  return [
    generatedHeader("The flotilla CLI", "the CLI's commander program (packages/cli/src/main.ts)"),
    `${cell(root.description())} \`pnpm flotilla …\` in this repository, \`flotilla …\` in the images; \`--help\` on every command prints what this page shows. How to work with it is [the CLI guide](../guides/cli.md).`,
    "",
    "Global flags, accepted by every command:",
    "",
    table(["Flag", "Default", "Meaning"], optionRows(root.options)),
    "",
    ...helpText(root)
      .split("\n")
      .filter((line) => /^(?:Config|Exit codes):/.test(line))
      .flatMap((line) => [cell(line), ""]),
    ...commands.flatMap(section),
  ].join("\n");
}
