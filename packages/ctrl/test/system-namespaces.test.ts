// --allowed-system-namespaces: only the system namespaces may be listed (a typo is an error at
// start, not a silently ignored entry).
import { test } from "node:test";
import assert from "node:assert/strict";
import { systemNamespaceList } from "../src/config.ts";

test("ctrl --allowed-system-namespaces takes only system namespaces", () => {
  assert.deepEqual(systemNamespaceList("allowed-system-namespaces", ""), []);
  assert.deepEqual(systemNamespaceList("allowed-system-namespaces", "kube-system, default"), ["kube-system", "default"]);
  assert.throws(() => systemNamespaceList("allowed-system-namespaces", "kube-system,demo"), /--allowed-system-namespaces "demo": expected some of kube-system/);
});
