// flotilla completion bash|zsh: completion scripts generated from the command tree, so they
// never fall behind the commands.
import type { Command } from "commander";
import { UsageError } from "../errors.ts";

interface Node {
  path: string[];
  words: string[];
}

function nodes(command: Command, path: string[] = []): Node[] {
  const words = [...command.commands.map((c) => c.name()), ...command.options.map((o) => o.long).filter((l): l is string => !!l), "--help"];
  return [{ path, words }, ...command.commands.flatMap((c) => nodes(c, [...path, c.name()]))];
}

export function completionScript(program: Command, shell: string): string {
  const all = nodes(program);
  const name = program.name();
  if (shell === "bash") {
    const cases = all.map((n) => `    "${n.path.join(" ")}") words="${n.words.join(" ")}" ;;`).join("\n");
    return `# bash completion for ${name}: source <(${name} completion bash)
_${name}_complete() {
  local cur cmdpath="" word
  cur="\${COMP_WORDS[COMP_CWORD]}"
  for word in "\${COMP_WORDS[@]:1:COMP_CWORD-1}"; do
    case "$word" in -*) ;; *) cmdpath="\${cmdpath:+$cmdpath }$word" ;; esac
  done
  local words=""
  case "$cmdpath" in
${cases}
  esac
  COMPREPLY=( $(compgen -W "$words" -- "$cur") )
}
complete -o default -F _${name}_complete ${name}
`;
  }
  if (shell === "zsh") {
    const cases = all.map((n) => `    "${n.path.join(" ")}") candidates=(${n.words.join(" ")}) ;;`).join("\n");
    return `#compdef ${name}
# zsh completion for ${name}: source <(${name} completion zsh)
_${name}() {
  local cmdpath="" word
  local -a candidates
  for word in \${words[2,CURRENT-1]}; do
    case "$word" in -*) ;; *) cmdpath="\${cmdpath:+$cmdpath }$word" ;; esac
  done
  case "$cmdpath" in
${cases}
  esac
  compadd -- $candidates
}
compdef _${name} ${name}
`;
  }
  throw new UsageError(`completion for ${JSON.stringify(shell)}: one of bash, zsh`);
}
