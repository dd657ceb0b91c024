import type { Command, Option } from 'commander';

/**
 * A bash completion script for the program, written from its own command tree, so a flag added to a
 * command completes with no other change: command names, then each command's flags, then the
 * values of flags with choices (`-o`, `--pod-security`), directories after `*-dir` flags and files
 * after `-f` and `--kubeconfig`. zsh loads it after `autoload -U bashcompinit && bashcompinit`.
 */
export function bashCompletion(program: Command): string {
  const name = program.name();
  const fn = `_${name.replace(/[^A-Za-z0-9]/g, '_')}`;
  const commands = program.commands;
  const values = commands.flatMap((c) => c.options.filter((o) => o.required || o.optional).flatMap((o) => valueCase(c.name(), o)));
  const flags = commands.map(
    (c) =>
      `    ${c.name()}) words=${quote(
        c.options
          .flatMap((o) => [o.short, o.long])
          .filter((f) => f !== undefined)
          .join(' '),
      )} ;;`,
  );
  return `# bash completion for ${name}: source <(${name} completion bash)
${fn}() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="\${COMP_WORDS[COMP_CWORD-1]}" cmd="\${COMP_WORDS[1]}" words
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W ${quote(commands.map((c) => c.name()).join(' '))} -- "$cur"))
    return
  fi
  case "$cmd $prev" in
${values.join('\n')}
  esac
  case "$cmd" in
${flags.join('\n')}
    *) words="" ;;
  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -F ${fn} ${name}
`;
}

// One `case` arm per flag that takes a value: its choices, a directory, or a file.
function valueCase(command: string, o: Option): string[] {
  const patterns = [o.short, o.long].filter((f) => f !== undefined).map((f) => `"${command} ${f}"`);
  const choices = o.argChoices;
  const words =
    choices !== undefined
      ? `-W ${quote(choices.join(' '))}`
      : /dir\b/.test(o.long ?? '')
        ? '-d'
        : /file|kubeconfig|client-ca/.test(o.long ?? '')
          ? '-f'
          : undefined;
  if (words === undefined) return [`    ${patterns.join('|')}) COMPREPLY=(); return ;;`];
  return [`    ${patterns.join('|')}) COMPREPLY=($(compgen ${words} -- "$cur")); return ;;`];
}

function quote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}
