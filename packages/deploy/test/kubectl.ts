// kubectl for the deployment tests: present, or the test skips (fails with CI=true).
import { execFileSync } from "node:child_process";

/** false when kubectl runs; else why the test skips. Throws under CI=true. */
export function kubectlMissing(): string | false {
  try {
    execFileSync("kubectl", ["version", "--client"], { stdio: "ignore" });
    return false;
  } catch {
    if (process.env.CI === "true") throw new Error("kubectl is required with CI=true");
    return "kubectl is not installed";
  }
}

export function kubectl(args: readonly string[], input?: string): string {
  return execFileSync("kubectl", args, { encoding: "utf8", input, stdio: ["pipe", "pipe", "pipe"] });
}
