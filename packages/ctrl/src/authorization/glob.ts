// Globs of namespace and region names: `*` stands for any run of characters (none included),
// everything else for itself. Names are DNS-1123 labels, so no other character needs a meaning.

/** Whether a name matches `glob`. */
export function globMatcher(glob: string): (name: string) => boolean {
  if (!glob.includes("*")) return (name) => name === glob;
  const escaped = glob.split("*").map((part) => part.replace(/[.+?^${}()|[\]\\-]/g, "\\$&"));
  const pattern = new RegExp(`^${escaped.join(".*")}$`);
  return (name) => pattern.test(name);
}
